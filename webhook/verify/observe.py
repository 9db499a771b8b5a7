"""What kube-scheduler did with one pod: created through the API server, then watched until it decided.

- ``Rejected``: the API server refused the create (its message).
- ``Fits``: the pod was bound (``spec.nodeName``) with nobody deleted.
- ``Preempts``: ``status.nominatedNodeName`` was set; the victims are the pods the scheduler marked
  (``DisruptionTarget``/``PreemptionByScheduler``) and deleted for it, plus those it chose while they were
  already terminating (it sends no API call for those; its log names them). The observation waits until it
  holds as many victims as the scheduler's own status message announces (``preempting N victims``).
- ``Unschedulable``: ``PodScheduled=False`` (reason ``Unschedulable``) and still no nomination a moment later.
- ``Error``: anything else, or no decision within the timeout: never an agreement, never a hang.

``settle`` then makes the cluster what it will be for the next pod: a preemptor's victims are deleted with
grace 0 (standing in for their kubelet) and the preemptor is waited for until it is bound; a pod that stays
pending (``Unschedulable``, ``Error``) is deleted, so that it does not take room meant for the pods after it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from webhook.observe.compare import ERROR
from webhook.preemption.results import Outcome
from webhook.verify.controlplane import ControlPlane, collection_path
from webhook.verify.loader import force_delete_pod

POLL_SECONDS = 0.05
# How long a PodScheduled=False must stand without a nomination before it counts as Unschedulable.
UNSCHEDULABLE_SETTLE_SECONDS = 0.5
VICTIM_COUNT = re.compile(r"preempting (\d+) victims")
ALREADY_DELETING = re.compile(r'"Victim Pod is already being deleted[^"]*".*?preemptor="([^"]+)".*?victim="([^"]+)"')


@dataclass(frozen=True, slots=True)
class Observation:
    outcome: str
    node: str | None = None
    victims: tuple[str, ...] = ()  # "namespace/name", sorted
    message: str = ""
    pod_name: str = ""  # the name the pod got (differs from the manifest's with generateName)
    bound_node: str | None = None  # where a preemptor was bound once its victims were gone


def _api_message(body: object) -> str:
    if isinstance(body, Mapping):
        return str(body.get("message") or body.get("reason") or body)
    return str(body)


def _condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return None


def terminating_pods(plane: ControlPlane) -> set[str]:
    _, listed = plane.request("GET", "/api/v1/pods")
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in (listed or {}).get("items", [])
            if p["metadata"].get("deletionTimestamp")}


class SchedulerLog:
    """The scheduler's log from a point on (its ``-v 2`` lines name victims it did not have to delete)."""

    def __init__(self, plane: ControlPlane) -> None:
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

    def already_deleting_victims(self, preemptor: str) -> set[str]:
        return {victim for who, victim in ALREADY_DELETING.findall(self.text()) if who == preemptor}


def observe_pod(plane: ControlPlane, manifest: Mapping[str, Any], *, timeout: float) -> Observation:
    """Create ``manifest`` and report what the scheduler did within ``timeout`` seconds."""
    before = terminating_pods(plane)
    log = SchedulerLog(plane)
    code, body = plane.request("POST", collection_path(manifest), manifest)
    if 400 <= code < 500:
        return Observation(Outcome.REJECTED, message=_api_message(body))
    if code not in (200, 201):
        return Observation(ERROR, message=f"the API server answered {code}: {_api_message(body)}")
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    deadline = time.monotonic() + timeout
    refused_since: float | None = None
    while time.monotonic() < deadline:
        code, pod = plane.request("GET", path)
        if code != 200:
            return Observation(ERROR, message=f"the pod could not be read back: {code} {_api_message(pod)}",
                               pod_name=name)
        node = (pod.get("spec") or {}).get("nodeName")
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        scheduled = _condition(pod, "PodScheduled") or {}
        if node:
            return Observation(Outcome.FITS, node=node, message=f"bound to {node}", pod_name=name)
        if nominated:
            return _observe_preemption(plane, f"{namespace}/{name}", path, str(nominated), before, log, deadline,
                                       timeout)
        if scheduled.get("status") == "False":
            reason = scheduled.get("reason")
            if reason not in ("Unschedulable", "SchedulingGated"):
                return Observation(ERROR, message=f"{reason}: {scheduled.get('message', '')}", pod_name=name)
            refused_since = refused_since if refused_since is not None else time.monotonic()
            if time.monotonic() - refused_since >= UNSCHEDULABLE_SETTLE_SECONDS:
                return Observation(Outcome.UNSCHEDULABLE, message=str(scheduled.get("message", reason)), pod_name=name)
        time.sleep(POLL_SECONDS)
    return Observation(ERROR, message=f"no scheduling decision within {timeout:g}s", pod_name=name)


def _observe_preemption(plane: ControlPlane, key: str, path: str, node: str, before: set[str], log: SchedulerLog,
                        deadline: float, timeout: float) -> Observation:
    name = key.split("/", 1)[1]
    victims: set[str] = set()
    message = ""
    while time.monotonic() < deadline:
        _, pod = plane.request("GET", path)
        message = str((_condition(pod or {}, "PodScheduled") or {}).get("message", ""))
        announced = VICTIM_COUNT.search(message)
        victims = (terminating_pods(plane) - before) | log.already_deleting_victims(key)
        if announced is not None and len(victims) >= int(announced.group(1)):
            return Observation(Outcome.PREEMPTS, node=node, victims=tuple(sorted(victims)), message=message,
                               pod_name=name)
        time.sleep(POLL_SECONDS)
    return Observation(ERROR, node=node, victims=tuple(sorted(victims)), pod_name=name,
                       message=f"nominated to {node}, but its victims were not all seen within {timeout:g}s"
                               f" ({len(victims)} seen): {message}".rstrip(": "))


def settle(plane: ControlPlane, observation: Observation, namespace: str, *, timeout: float) -> Observation:
    """Leave the cluster as it will be for the next pod (see the module docstring)."""
    name = observation.pod_name
    if not name:
        return observation
    if observation.outcome in (Outcome.UNSCHEDULABLE, ERROR):
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
        if bound:
            note = "" if bound == observation.node else f" (then bound to {bound}, not to the nominated node)"
            return replace(observation, bound_node=bound, message=observation.message + note)
        time.sleep(POLL_SECONDS)
    return replace(observation, message=observation.message + f" (not bound within {timeout:g}s after its victims"
                                                               " were removed)")
