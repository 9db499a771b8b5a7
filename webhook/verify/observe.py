"""What kube-scheduler did with one pod: created through the API server, then watched until it decided.

- ``Rejected``: the API server refused the create (its message).
- ``Fits``: the pod was bound (``spec.nodeName``) with nobody deleted.
- ``Preempts``: ``status.nominatedNodeName`` was set together with ``PodScheduled=False`` (a nomination without
  it is the binding cycle's, NominatedNodeNameForExpectation, v1.35+). The victims are decided from what the API
  shows in every release since v1.33 (``PreemptionEvidence``): the pods on the nominated node the scheduler marked
  ``DisruptionTarget``/``PreemptionByScheduler`` or deleted after the pod was created, and the pods whose
  ``Preempted`` Event names the pod's UID (upstream marks, deletes, then records the Event for each victim:
  pkg/scheduler/framework/preemption, ``PreemptPod``). The scheduler's ``-v 2`` log is only a hint: it names the
  victims that were already terminating (v1.35+ sends no API call for those), and says when the asynchronous
  preemption finished.
- ``Unschedulable``: ``PodScheduled=False`` (reason ``Unschedulable``) and still no nomination a moment later.
- ``Gated``: the pod has ``spec.schedulingGates`` and stays ``PodScheduled=False``/``SchedulingGated`` (the API
  server's condition on create) with no nomination and no binding for a moment.
- ``NotScheduled``: no scheduler touched the pod (no ``PodScheduled`` condition, no nomination, no binding) for
  ``NOT_SCHEDULED_SETTLE_SECONDS``: kube-scheduler sets one within milliseconds for a pod it serves.
- ``Error``: anything else, or no decision within the timeout: never an agreement, never a hang.

``settle`` then makes the cluster what it will be for the next pod: a preemptor's victims are deleted with
grace 0 (standing in for their kubelet) and the preemptor is waited for until it is bound; a pod that stays
pending (``Unschedulable``, ``Gated``, ``NotScheduled``, ``Error``) is deleted, so that it does not take room
meant for the pods after it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from webhook.cluster.model import DEFAULT_SCHEDULER_NAME
from webhook.observe.compare import ERROR
from webhook.preemption.results import Outcome
from webhook.verify.controllers import (
    complete_bindings,
    create_pod_claims,
    needs_claims_made,
    pod_needs_controllers,
    with_stand_in_gate,
)
from webhook.verify.controlplane import PlaneApi, SchedulingPlane, collection_path
from webhook.verify.loader import force_delete_pod

POLL_SECONDS = 0.05
# How long a PodScheduled=False must stand without a nomination before it counts as Unschedulable.
UNSCHEDULABLE_SETTLE_SECONDS = 0.5
# How long a pod must stand with no scheduler's condition before it counts as NotScheduled (generous: a busy
# scheduler still records a decision on a pod it serves within a second).
NOT_SCHEDULED_SETTLE_SECONDS = 3.0
# With no count to wait for (before v1.37 the PostFilter's success status carries no message) and no log hint,
# a preemption is complete once every victim marked so far is deleted and has its Preempted Event, and nothing
# changed for this long; without the Events (an Event is best effort upstream), after QUIET_WITHOUT_EVENTS.
QUIET_SECONDS = 1.0
QUIET_WITHOUT_EVENTS_SECONDS = 3.0
# v1.37+: the PostFilter's success status, kept in the PodScheduled condition's message.
VICTIM_COUNT = re.compile(r"preempting (\d+) victims")
# Hints from the scheduler's -v 2 log (pkg/scheduler/framework/preemption, v1.33 .. v1.37).
ALREADY_DELETING = re.compile(r'"Victim Pod is already being deleted[^"]*".*?preemptor="([^"]+)".*?victim="([^"]+)"')
ASYNC_FINISHED = re.compile(r'"Async Preemption finished completely" preemptor="([^"]+)"')
PREEMPTED_REASON = "Preempted"


@dataclass(frozen=True, slots=True)
class Observation:
    outcome: str
    node: str | None = None
    victims: tuple[str, ...] = ()  # "namespace/name", sorted
    message: str = ""
    pod_name: str = ""  # the name the pod got (differs from the manifest's with generateName)
    bound_node: str | None = None  # where a preemptor was bound once its victims were gone
    uid: str = ""  # the pod's UID (the Preempted Events name it)
    log_only_victims: tuple[str, ...] = ()  # victims only the scheduler's log named (already terminating)
    before: PodMarks | None = field(default=None, compare=False, repr=False)  # the marks before the pod was created


def _api_message(body: object) -> str:
    if isinstance(body, Mapping):
        return str(body.get("message") or body.get("reason") or body)
    return str(body)


def _condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return None


def _key(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def preempted_by_scheduler(pod: Mapping[str, Any]) -> bool:
    """The ``DisruptionTarget`` condition upstream's ``PreemptPod`` sets before it deletes a victim."""
    condition = _condition(pod, "DisruptionTarget") or {}
    return condition.get("status") == "True" and condition.get("reason") == "PreemptionByScheduler"


@dataclass(frozen=True, slots=True)
class PodMarks:
    """Which pods were already terminating or marked as preempted: what a new preemption must not claim."""

    terminating: frozenset[str] = frozenset()
    marked: frozenset[str] = frozenset()

    @classmethod
    def of(cls, pods: Iterable[Mapping[str, Any]]) -> PodMarks:
        listed = list(pods)
        return cls(frozenset(_key(p) for p in listed if p["metadata"].get("deletionTimestamp")),
                   frozenset(_key(p) for p in listed if preempted_by_scheduler(p)))


def pod_marks(plane: PlaneApi) -> PodMarks:
    _, listed = plane.request("GET", "/api/v1/pods")
    return PodMarks.of((listed or {}).get("items", []))


@dataclass(frozen=True, slots=True)
class PreemptionEvidence:
    """What the API (and, as a hint, the log) shows of one preemption at one moment."""

    marked: frozenset[str] = frozenset()  # newly marked DisruptionTarget/PreemptionByScheduler
    deleted: frozenset[str] = frozenset()  # newly terminating since the pod was created
    terminating: frozenset[str] = frozenset()  # every terminating pod on the node, old or new
    evented: frozenset[str] = frozenset()  # a Preempted Event names the preemptor
    log_deleting: frozenset[str] = frozenset()  # the log: chosen while already terminating (no API call)
    announced: int | None = None  # v1.37+: "preempting N victims"
    log_finished: bool = False  # the log: "Async Preemption finished completely"

    @property
    def victims(self) -> frozenset[str]:
        return self.marked | self.deleted | self.evented | self.log_deleting

    @property
    def in_flight(self) -> frozenset[str]:
        """Marked but not deleted yet: upstream's PreemptPod is between its two API calls."""
        return self.marked - self.terminating


def preemption_complete(evidence: PreemptionEvidence, quiet_for: float) -> bool:
    """Whether ``evidence`` (unchanged for ``quiet_for`` seconds) is the whole preemption.

    The count of v1.37+ decides when it is there; else the log's "finished" with every marked victim deleted;
    else the API alone: at least one victim, none in flight, each with its Event and quiet for QUIET_SECONDS
    (QUIET_WITHOUT_EVENTS_SECONDS when an Event is missing). Upstream always has at least one victim
    (DryRunPreemption makes a candidate without victims an error)."""
    victims = evidence.victims
    if evidence.announced is not None:
        return len(victims) >= evidence.announced and not evidence.in_flight
    if not victims or evidence.in_flight:
        return False
    if evidence.log_finished:
        return True
    api_victims = evidence.marked | evidence.deleted
    if api_victims <= evidence.evented:
        return quiet_for >= QUIET_SECONDS
    return quiet_for >= QUIET_WITHOUT_EVENTS_SECONDS


class SchedulerLog:
    """The scheduler's log from a point on (its ``-v 2`` lines: hints, never the only evidence)."""

    def __init__(self, plane: SchedulingPlane) -> None:
        self.path = plane.scheduler_log
        try:
            self.offset = self.path.stat().st_size
        except OSError:
            self.offset = 0

    def text(self) -> str:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                return log.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def already_deleting_victims(self, preemptor: str, text: str | None = None) -> set[str]:
        text = self.text() if text is None else text
        return {victim for who, victim in ALREADY_DELETING.findall(text) if who == preemptor}

    def finished(self, preemptor: str, text: str | None = None) -> bool:
        text = self.text() if text is None else text
        return preemptor in ASYNC_FINISHED.findall(text)


def preempted_events(plane: PlaneApi, preemptor_uid: str) -> set[str]:
    """Victims whose ``Preempted`` Event names the preemptor (``related``, or its UID in the message)."""
    _, listed = plane.request("GET", "/api/v1/events", query={"fieldSelector": f"reason={PREEMPTED_REASON}"})
    victims = set()
    for event in (listed or {}).get("items", []):
        related = (event.get("related") or {}).get("uid")
        if related == preemptor_uid or (preemptor_uid and preemptor_uid in str(event.get("message", ""))):
            involved = event.get("involvedObject") or {}
            victims.add(f"{involved.get('namespace')}/{involved.get('name')}")
    return victims


def with_owner(plane: PlaneApi, manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    """A workload's replica with its controller (``ownerReferences`` without a uid, scenarios.py): the owner is
    created, with no replicas (no controller manager runs here), the pod's labels as its selector and the pod as
    its template, so kube-scheduler's DefaultSelector finds it and PodTopologySpread's default constraints apply
    as they do to a Deployment's pods; the pod then names it by its uid. Without one, the manifest as it is."""
    meta = manifest.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    if len(owners) != 1 or owners[0].get("uid"):
        return manifest
    owner = owners[0]
    kind, name, namespace = str(owner["kind"]), str(owner["name"]), str(meta.get("namespace") or "default")
    labels = dict(meta.get("labels") or {})
    resource = "replicasets" if kind == "ReplicaSet" else "statefulsets"
    path = f"/apis/apps/v1/namespaces/{namespace}/{resource}"
    code, body = plane.request("GET", f"{path}/{name}")
    if code != 200 or body.get("spec", {}).get("selector", {}).get("matchLabels") != labels:
        if code == 200:
            plane.request("DELETE", f"{path}/{name}")
        spec: dict[str, Any] = {"replicas": 0, "selector": {"matchLabels": labels},
                                "template": {"metadata": {"labels": labels}, "spec": manifest.get("spec") or {}}}
        if kind == "StatefulSet":
            spec["serviceName"] = name
        code, body = plane.request("POST", path, {"apiVersion": "apps/v1", "kind": kind,
                                                  "metadata": {"name": name, "namespace": namespace},
                                                  "spec": spec})
        if code not in (200, 201):  # the pod is created without an owner (the prediction assumed one)
            return {**manifest, "metadata": {k: v for k, v in meta.items() if k != "ownerReferences"}}
    uid = str(body["metadata"]["uid"])
    return {**manifest, "metadata": {**meta, "ownerReferences": [{**owner, "uid": uid}]}}


def observe_pod(plane: SchedulingPlane, manifest: Mapping[str, Any], *, timeout: float,
                scheduler_names: Collection[str] | None = None) -> Observation:
    """Create ``manifest`` and report what the scheduler did within ``timeout`` seconds.

    ``scheduler_names``: the profiles the plane's kube-scheduler runs, when known; a pod naming one of them is never
    taken for ``NotScheduled`` (a scheduler slowed down by a busy machine is waited for until ``timeout``)."""
    before = pod_marks(plane)
    log = SchedulerLog(plane)
    manifest = with_owner(plane, manifest)
    make_claims = needs_claims_made(manifest)
    code, body = plane.request("POST", collection_path(manifest),
                               with_stand_in_gate(manifest) if make_claims else manifest)
    if 400 <= code < 500:
        return Observation(Outcome.REJECTED, message=_api_message(body))
    if code not in (200, 201):
        return Observation(ERROR, message=f"the API server answered {code}: {_api_message(body)}")
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    if make_claims:  # the controllers' claims exist before the scheduler first sees the pod (controllers.py)
        create_pod_claims(plane, body)
    binds = pod_needs_controllers(body)
    uid = str(body["metadata"].get("uid") or "")
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    scheduler_name = (body.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER_NAME
    served = scheduler_names is not None and scheduler_name in scheduler_names
    created = time.monotonic()
    deadline = created + timeout
    refused_since: float | None = None
    while time.monotonic() < deadline:
        code, pod = plane.request("GET", path)
        if code != 200:
            return Observation(ERROR, message=f"the pod could not be read back: {code} {_api_message(pod)}",
                               pod_name=name, uid=uid)
        node = (pod.get("spec") or {}).get("nodeName")
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        scheduled = _condition(pod, "PodScheduled") or {}
        if binds and not node:
            complete_bindings(plane, namespace)
        if node:
            return Observation(Outcome.FITS, node=node, message=f"bound to {node}", pod_name=name, uid=uid)
        # A nomination with PodScheduled=False is a preemption's, unless the condition is still the API server's
        # SchedulingGated of a pod whose gate verify removed (controllers.py): then the nomination is the binding
        # cycle's (NominatedNodeNameForExpectation) while VolumeBinding's PreBind waits for its volumes.
        if nominated and scheduled.get("status") == "False" and scheduled.get("reason") != "SchedulingGated":
            return _observe_preemption(plane, PreemptorRef(namespace, name, uid, path, str(nominated)), before, log,
                                       deadline, timeout)
        if not scheduled:
            if not served and time.monotonic() - created >= NOT_SCHEDULED_SETTLE_SECONDS:
                return Observation(Outcome.NOT_SCHEDULED, pod_name=name, uid=uid,
                                   message=f"no scheduler acted on the pod within {NOT_SCHEDULED_SETTLE_SECONDS:g}s")
        elif scheduled.get("status") == "False":
            reason = scheduled.get("reason")
            gated = reason == "SchedulingGated" and bool((pod.get("spec") or {}).get("schedulingGates"))
            if reason == "SchedulingGated" and not gated:
                pass  # verify's own gate was just removed (controllers.py): the scheduler has not looked yet
            elif gated:
                refused_since = refused_since if refused_since is not None else time.monotonic()
                if time.monotonic() - refused_since >= UNSCHEDULABLE_SETTLE_SECONDS:
                    return Observation(Outcome.GATED, message=str(scheduled.get("message") or reason),
                                       pod_name=name, uid=uid)
            elif reason != "Unschedulable":
                return Observation(ERROR, message=f"{reason}: {scheduled.get('message', '')}", pod_name=name,
                                   uid=uid)
            else:
                refused_since = refused_since if refused_since is not None else time.monotonic()
                if time.monotonic() - refused_since >= UNSCHEDULABLE_SETTLE_SECONDS:
                    return Observation(Outcome.UNSCHEDULABLE, message=str(scheduled.get("message", reason)),
                                       pod_name=name, uid=uid)
        time.sleep(POLL_SECONDS)
    return Observation(ERROR, message=f"no scheduling decision within {timeout:g}s", pod_name=name, uid=uid)


@dataclass(frozen=True, slots=True)
class PreemptorRef:
    namespace: str
    name: str
    uid: str
    path: str
    node: str
    key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")


def gather_evidence(plane: PlaneApi, preemptor: PreemptorRef, before: PodMarks, log: SchedulerLog,
                    message: str) -> PreemptionEvidence:
    """The evidence now: the pods on the nominated node, the Preempted Events, the log's hints.

    The log is read first: upstream logs "finished" after its last API call, so a listing made after reading that
    line holds every mark and deletion (read the other way round, a listing made just before the last victim was
    marked would be taken as complete)."""
    text = log.text()
    _, listed = plane.request("GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={preemptor.node}"})
    on_node = {_key(p): p for p in (listed or {}).get("items", [])}
    now = PodMarks.of(on_node.values())
    announced = VICTIM_COUNT.search(message)
    return PreemptionEvidence(
        marked=frozenset(now.marked - before.marked),
        deleted=frozenset(now.terminating - before.terminating),
        terminating=now.terminating,
        evented=frozenset(preempted_events(plane, preemptor.uid)) if preemptor.uid else frozenset(),
        log_deleting=frozenset(log.already_deleting_victims(preemptor.key, text)),
        announced=int(announced.group(1)) if announced else None,
        log_finished=log.finished(preemptor.key, text),
    )


def _observe_preemption(plane: PlaneApi, preemptor: PreemptorRef, before: PodMarks, log: SchedulerLog,
                        deadline: float, timeout: float) -> Observation:
    evidence = PreemptionEvidence()
    message = ""
    changed_at = time.monotonic()
    while time.monotonic() < deadline:
        _, pod = plane.request("GET", preemptor.path)
        message = str((_condition(pod or {}, "PodScheduled") or {}).get("message", ""))
        current = gather_evidence(plane, preemptor, before, log, message)
        if current != evidence:
            evidence, changed_at = current, time.monotonic()
        if preemption_complete(evidence, time.monotonic() - changed_at):
            return _preempts(preemptor, evidence, message, before)
        time.sleep(POLL_SECONDS)
    seen = sorted(evidence.victims)
    return Observation(ERROR, node=preemptor.node, victims=tuple(seen), pod_name=preemptor.name, uid=preemptor.uid,
                       message=f"nominated to {preemptor.node}, but its victims were not all seen within {timeout:g}s"
                               f" ({len(seen)} seen): {message}".rstrip(": "))


def _preempts(preemptor: PreemptorRef, evidence: PreemptionEvidence, message: str, before: PodMarks) -> Observation:
    log_only = evidence.log_deleting - (evidence.marked | evidence.deleted | evidence.evented)
    return Observation(Outcome.PREEMPTS, node=preemptor.node, victims=tuple(sorted(evidence.victims)),
                       message=message, pod_name=preemptor.name, uid=preemptor.uid,
                       log_only_victims=tuple(sorted(log_only)), before=before)


def late_victims(plane: PlaneApi, observation: Observation) -> set[str]:
    """Victims of this preemption seen only after its observation was complete: marked on its node since the pod
    was created, or named by a Preempted Event (an Event in a terminating namespace is refused, so both)."""
    late = preempted_events(plane, observation.uid) if observation.uid else set()
    if observation.before is not None and observation.node:
        _, listed = plane.request("GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={observation.node}"})
        late |= PodMarks.of((listed or {}).get("items", [])).marked - observation.before.marked
    return late - set(observation.victims)


def settle(plane: PlaneApi, observation: Observation, namespace: str, *, timeout: float) -> Observation:
    """Leave the cluster as it will be for the next pod (see the module docstring)."""
    name = observation.pod_name
    if not name:
        return observation
    if observation.outcome in (Outcome.UNSCHEDULABLE, Outcome.GATED, Outcome.NOT_SCHEDULED, ERROR):
        force_delete_pod(plane, namespace, name)
        return observation
    if observation.outcome != Outcome.PREEMPTS:
        return observation
    for victim in observation.victims:
        victim_namespace, victim_name = victim.split("/", 1)
        force_delete_pod(plane, victim_namespace, victim_name)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, pod = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        bound = ((pod or {}).get("spec") or {}).get("nodeName")
        if not bound and pod_needs_controllers(pod or {}):
            complete_bindings(plane, namespace)
        if bound:
            note = "" if bound == observation.node else f" (then bound to {bound}, not to the nominated node)"
            late = late_victims(plane, observation)
            for victim in sorted(late):
                force_delete_pod(plane, *victim.split("/", 1))
            if late:
                note += f" (victims seen only after the observation was complete: {', '.join(sorted(late))})"
            return replace(observation, bound_node=bound, message=observation.message + note,
                           victims=tuple(sorted({*observation.victims, *late})))
        time.sleep(POLL_SECONDS)
    return replace(observation, message=observation.message + f" (not bound within {timeout:g}s after its victims"
                                                               " were removed)")
