"""The predictor's entry points: one replica (``predict_pod``), pods in order (``simulate_pods``), and the
Priority admission plugin's resolution in front of them (``predict_pods``, ``predict_objects``).

Per replica (docs/preemption.md §2): PreFilter and Filter (schedule_one.py) and, when the pod fits nowhere,
DefaultPreemption's PostFilter (plugins/defaultpreemption). Fits: the pod's own nominated node if it passes, else the
node the profile's Score plugins rank highest (``schedule_one.select_node``; every node of that score in
``tied_nodes``), unless the scheduler scores only a sample of the feasible nodes (``placement: sampled``: then no
node is claimed). Each replica that fits or preempts is bound to its node in the ``ClusterView`` before the next
replica is predicted; a replica that stays pending changes nothing. A result after a sampled placement names it in
``depends_on``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.cluster.copying import replace_fields
from webhook.cluster.model import PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER, Pod
from webhook.cluster.reader_resources import without_pod_level_resources
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.deadline import DEADLINE_STRIDE, Deadline, acquire_before
from webhook.preemption.framework.context import PredictionContext
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.index import StateIndex, state_index
from webhook.preemption.framework.preemption import Candidate
from webhook.preemption.framework.types import fit_error_message
from webhook.preemption.framework.view import ClusterView
from webhook.preemption.plugins import nodeaffinity, nodeports, noderesources, volumebinding
from webhook.preemption.plugins.defaultpreemption.default_preemption import DefaultPreemption
from webhook.preemption.plugins.dynamicresources import plugin as dynamicresources
from webhook.preemption.plugins.helper import required_node_affinity_matches, tolerates
from webhook.preemption.plugins.registry import default_preemption
from webhook.preemption.results import (
    DEFAULT_GRACE_PERIOD_SECONDS,
    Outcome,
    PreemptionArgs,
    PreemptionResult,
    VictimInfo,
)
from webhook.preemption.schedule_one import (
    NOMINATED,
    ONLY_NODE,
    SAMPLED,
    SCORED,
    FilterResult,
    Placement,
    find_nodes_that_fit_pod,
    new_context,
    num_nodes_to_find,
    select_node,
)
from webhook.preemption.workloads import MAX_PODS_PER_REQUEST, expand_objects, replica_name
from webhook.priority.chain import Admitted, PodQuotaCheck, admit_pods, resource_quota_only
from webhook.priority.resolution import (
    SYSTEM_CRITICAL_PRIORITY,
    effective_classes,
    resolve_pod_priority,
)

__all__ = ["PodQuotaCheck", "resource_quota_only"]  # the quota stage's type and default, from the admission chain

NO_NODES_AVAILABLE = "no nodes available to schedule pods"
PREEMPTION_DISABLED = (
    "preemption: disabled in the scheduler profile (scheduler.preemption: disabled), so the pod would stay Pending."
)


def _victim_info(pod: Pod, candidate: Candidate) -> VictimInfo:
    grace = pod.termination_grace_period_seconds
    return VictimInfo(pod.namespace, pod.name, candidate.node, pod.effective_priority, pod.key in candidate.violating,
                      DEFAULT_GRACE_PERIOD_SECONDS if grace is None else grace)


def _gap_note(pod: Pod) -> str:
    return f" Not modelled (the prediction ignores it): {'; '.join(pod.unmodeled)}." if pod.unmodeled else ""


def _kubelet_admission_failure(view: ClusterView, pod: Pod) -> str | None:
    """Why the kubelet of ``pod.node_name`` would refuse the pod (its ``generalFilter``), or None when it admits it.

    The kubelet checks the node name, node selector and required node affinity, host ports, resources and
    NoExecute taints; it ignores cordons, NoSchedule taints, inter-pod affinity and topology spread.
    """
    name = pod.node_name
    if name not in view.state.nodes:
        return f"node {name} does not exist"
    node = view.node(name)
    if not required_node_affinity_matches(pod, node):
        return nodeaffinity.ERR_REASON.replace("node(s)", "the node")
    for taint in node.taints:
        if taint.effect == "NoExecute" and not tolerates(pod.tolerations, taint):
            return f"the pod does not tolerate the node's NoExecute taint {taint.key}"
    info = view.node_info(name)
    if pod.host_ports and nodeports.host_ports_conflict(pod.host_ports, nodeports.ports_in_use(info)):
        return nodeports.ERR_REASON.replace("node(s)", "the node")
    status = noderesources.fits(pod, info)
    return None if status.ok else ", ".join(status.reasons)


def pending_result(pod: Pod, policy: str, message: str = "") -> PreemptionResult:
    """The result of a replica that stays Pending (``Unschedulable``)."""
    return PreemptionResult(pod=pod.key, priority=pod.effective_priority, priority_class_name=pod.priority_class_name,
                            preemption_policy=policy, outcome=Outcome.UNSCHEDULABLE, message=message)


def _predict_bound_pod(view: ClusterView, pod: Pod, policy: str, gaps: str) -> PreemptionResult:
    """A pod that sets ``spec.nodeName``: the scheduler never handles it, so nothing is preempted for it."""
    failure = _kubelet_admission_failure(view, pod)
    if failure is None:
        return replace_fields(pending_result(pod, policy), outcome=Outcome.FITS, node=pod.node_name,
                              message=f"spec.nodeName binds the pod to node {pod.node_name}, where it fits;"
                                      f" the scheduler does not handle it and preempts nothing." + gaps)
    message = (f"spec.nodeName binds the pod to node {pod.node_name}, so the scheduler never handles it and never"
               f" preempts for it; the kubelet will reject it: {failure}.")
    if pod.effective_priority >= SYSTEM_CRITICAL_PRIORITY and pod.node_name in view.state.nodes:
        message += (" As a critical pod (system priority), the kubelet may instead evict pods on that node itself"
                    " to admit it.")
    return pending_result(pod, policy, message + gaps)


def _not_acted_on(pod: Pod, args: PreemptionArgs, policy: str) -> PreemptionResult | None:
    """``Gated`` or ``NotScheduled`` when the configured kube-scheduler does not try the pod now, else None.

    The queue's PreEnqueue (the SchedulingGates plugin) keeps a pod with ``spec.schedulingGates`` out of the active
    queue until every gate is removed, and the API server stores it ``PodScheduled=False``/``SchedulingGated``
    whichever scheduler it names (pkg/registry/core/pod/strategy.go), so that comes first; the informer adds to the
    queue only pods whose ``spec.schedulerName`` is one of its profiles' (``responsibleForPod``,
    pkg/scheduler/eventhandlers.go). Neither runs Filter or PostFilter, so neither preempts."""
    other = pod.scheduler_name not in args.scheduler_names
    elsewhere = (f"spec.schedulerName {pod.scheduler_name} is not a profile of the configured kube-scheduler"
                 f" ({', '.join(args.scheduler_names)})")
    if pod.scheduling_gates:
        then = (f"; {elsewhere}, so even then it is that scheduler's" if other else
                "; then it is scheduled against the cluster as it is at that time (preview it again then)")
        return replace_fields(
            pending_result(pod, policy), outcome=Outcome.GATED,
            message=f"spec.schedulingGates ({', '.join(pod.scheduling_gates)}): the pod is not scheduled and nothing"
                    f" is preempted for it until every gate is removed{then}.")
    if other:
        return replace_fields(
            pending_result(pod, policy), outcome=Outcome.NOT_SCHEDULED,
            message=f"{elsewhere}: it never sees the pod and preempts nothing for it; whichever scheduler serves"
                    " that name places it.")
    return None


def predict_pod(view: ClusterView, pod: Pod, args: PreemptionArgs, *,
                deadline: Deadline | float | None = None) -> tuple[PreemptionResult, Candidate | None]:
    """One replica whose ``spec.priority`` is already resolved, and the candidate whose victims it evicts.

    Does not change ``view``.
    """
    result, candidate, _ = _predict_pod(view, pod, args, deadline)
    return result, candidate


def _predict_pod(view: ClusterView, pod: Pod, args: PreemptionArgs, deadline: Deadline | float | None
                 ) -> tuple[PreemptionResult, Candidate | None, CycleState | None]:
    """``predict_pod``, and the cycle state of the pod (what Reserve reads), when the scheduler would handle it."""
    policy = pod.preemption_policy or PREEMPT_LOWER_PRIORITY
    gaps = _gap_note(pod)
    if pod.node_name:
        if not view.node_names:
            return pending_result(pod, policy, NO_NODES_AVAILABLE + "." + gaps), None, None
        return _predict_bound_pod(view, pod, policy, gaps), None, None
    not_acted_on = _not_acted_on(pod, args, policy)
    if not_acted_on is not None:
        return not_acted_on, None, None
    if not view.node_names:
        return pending_result(pod, policy, NO_NODES_AVAILABLE + "." + gaps), None, None
    ctx = new_context(view, pod, args, deadline=deadline)
    ctx.check_deadline()
    gaps += _not_known_note(ctx.cycle.notes)  # what the plugins could not check: the state lacks a kind
    filtered = find_nodes_that_fit_pod(ctx, num_nodes_to_find(ctx))
    result, candidate = _post_filter(ctx, filtered, policy, gaps)
    return result, candidate, ctx.cycle


def _post_filter(ctx: PredictionContext, filtered: FilterResult, policy: str, gaps: str
                 ) -> tuple[PreemptionResult, Candidate | None]:
    """The result once the Filter pass is done: the node it found (scored among those that fit), or what the
    PostFilter makes of the statuses."""
    view, pod, args = ctx.view, ctx.pod, ctx.args
    if filtered.error:
        message = f"the scheduler's attempt fails with an error, and it retries after a back-off: {filtered.error}."
        return pending_result(pod, policy, message + gaps), None
    if filtered.fit_node is not None:
        ctx.check_deadline()
        placement = select_node(ctx, filtered)
        return PreemptionResult(pod=pod.key, priority=pod.effective_priority,
                                priority_class_name=pod.priority_class_name, preemption_policy=policy,
                                outcome=Outcome.FITS, node=placement.node,
                                tied_nodes=placement.tied if placement.exact else (),
                                message=fits_message(placement) + gaps, placement=placement.how,
                                scored_nodes=placement.scored, top_nodes=placement.top), None
    counts = Counter(filtered.statuses.values()) if filtered.counts is None else filtered.counts
    if filtered.pre_filter_message:  # upstream FitError.Error: the PreFilter's message instead of the histogram
        fit_error = f"0/{len(view.node_names)} nodes are available: {filtered.pre_filter_message}."
    else:
        fit_error = fit_error_message(len(view.node_names), counts)
    if not args.preemption_enabled and pod.preemption_policy != PREEMPT_NEVER:
        # No PostFilter in the scheduler profile: the pod stays Pending (a Never pod keeps its own reason below).
        return pending_result(pod, policy, f"{fit_error} {PREEMPTION_DISABLED}{gaps}"), None
    preemption: DefaultPreemption = default_preemption(args)
    post = preemption.post_filter(ctx, filtered.statuses, potential=filtered.potential)
    if post.candidate is None:
        pending = pending_result(pod, policy, f"{fit_error} {post.message}{gaps}")
        return replace_fields(pending, preemption_status=post.message), None
    candidate = post.candidate
    victims = tuple(_victim_info(v, candidate) for v in candidate.victims)
    num_candidates = post.num_candidates
    sampled = post.candidate_count > num_candidates
    notes = [f"{fit_error} Preemption would nominate node {candidate.node} and evict {len(victims)} pod(s)"
             f" ({candidate.num_pdb_violations} PDB violation(s))."]
    if len(post.tied) > 1:
        notes.append(f"{len(post.tied)} nodes tie on every upstream criterion; upstream picks one at random,"
                     " PreemptGuard shows the first by name.")
    if sampled:
        notes.append(f"{post.candidate_count} candidate nodes exceed the {num_candidates} that upstream samples"
                     f" from {post.potential_count} potential nodes; upstream may choose a different node.")
    return replace_fields(
        pending_result(pod, policy), outcome=Outcome.PREEMPTS, node=candidate.node, victims=victims,
        pdb_violations=candidate.num_pdb_violations, candidate_nodes=post.candidate_count, tied_nodes=post.tied,
        tied_victims=tuple((c.node, c.victims) for c in post.tied_candidates),
        expected_delay_seconds=max(v.grace_period_seconds for v in victims),
        message=" ".join(notes) + gaps, sampled=sampled,
    ), candidate


def fits_message(placement: Placement) -> str:
    """What a ``Fits`` result says about its node."""
    node = placement.node
    how = placement.how
    if how == NOMINATED:
        return f"fits on its nominated node {node} without preemption (the scheduler tries that node first)."
    if how == ONLY_NODE:
        return f"fits on node {node} without preemption (the only node that fits)."
    if how == SCORED:
        best = placement.top[0].total if placement.top else 0
        message = (f"fits on node {node} without preemption: the highest score ({best}) of the"
                   f" {placement.scored} nodes it fits on.")
        if len(placement.tied) > 1:
            message += (f" {len(placement.tied)} nodes tie on that score (tiedNodes); the scheduler takes any of"
                        " them, PreemptGuard shows the first by name.")
        return message
    if how == SAMPLED:
        return (f"fits without preemption on more than {placement.scored} nodes, and the scheduler scores only"
                f" {placement.scored} of them (percentageOfNodesToScore), starting where its previous search stopped:"
                f" which node it picks depends on that sample. Of the first {placement.scored} by name, {node} scores"
                " highest. Set scheduler.percentageOfNodesToScore: 100 (in the scheduler's profile too) for a"
                " prediction of the node.")
    return (f"fits without preemption on {placement.feasible} or more nodes; the scheduler profile runs no Score"
            " plugin, so the scheduler takes the first node that fits from where its previous search stopped"
            f" ({node} is the first by name).")


def reserve(view: ClusterView, cycle: CycleState, pod: Pod, node: str) -> None:
    """Reserve for a replica placed on ``node``: what the storage and device plugins assume for the next pods (the
    volumes VolumeBinding chose there, the devices DynamicResources allocated there)."""
    volumes = volumebinding.assumed_volumes(cycle, node)
    if volumes is not None:
        view.assume_volumes(volumes.static_bindings, volumes.dynamic_provisions, node)
    claims = dynamicresources.reserved_claims(cycle, pod, node)
    if claims:
        view.assume_allocations(claims)


def simulate_pods(state: ClusterState, pods: Sequence[Pod], args: PreemptionArgs | None = None, *,
                  deadline: Deadline | float | None = None, index: StateIndex | None = None) -> list[PreemptionResult]:
    """Predict each pod in order, applying each placement and eviction before the next (never mutating ``state``).

    The pods' priorities are already resolved. ``deadline`` (a ``Deadline``, or a ``time.monotonic()`` value):
    once it passes or is cancelled, ``PredictionTimeout`` is raised from inside the loops, so a caller enforcing
    a time budget leaves no runaway computation behind. ``index``: the state's index to work on (default
    ``state_index(state)``; /preview has one of its own, so admission never waits for a preview's lock).
    """
    args = args or PreemptionArgs()
    deadline = Deadline.of(deadline)
    index = index if index is not None else state_index(state)
    acquire_before(index.lock, deadline, "another prediction")
    try:
        view = ClusterView(state, index)
        results = []
        last = len(pods) - 1
        unsure: list[str] = []  # earlier pods whose node the scheduler may choose otherwise
        for i, pod in enumerate(pods):
            deadline.check()
            if not args.pod_level_resources:
                pod = without_pod_level_resources(pod)
            result, candidate, cycle = _predict_pod(view, pod, args, deadline)
            if unsure:
                result = _depending_on(result, unsure)
            results.append(result)
            if result.placement == SAMPLED:
                unsure.append(result.pod)
            if i == last:
                break  # nothing reads the view after the last replica: skip applying its placement
            if candidate is not None:
                for victim in candidate.victims:
                    view.evict(victim)
            if result.node is not None:
                bound = view.bind(pod, result.node)
                if cycle is not None:
                    reserve(view, cycle, bound, result.node)
        return results
    finally:
        index.lock.release()


# How many earlier pods a result names in ``depends_on`` (the message counts the rest).
MAX_DEPENDS_ON = 10


def _depending_on(result: PreemptionResult, unsure: list[str]) -> PreemptionResult:
    """The result of a pod simulated after pods whose node was not predicted (sampled): it assumes they landed on
    the nodes shown for them, which the scheduler may not choose."""
    named = tuple(unsure[:MAX_DEPENDS_ON])
    more = len(unsure) - len(named)
    listed = ", ".join(named) + (f" and {more} more" if more else "")
    note = (f" This assumes {listed} landed where shown; the scheduler scores a sample of nodes for"
            f" {'it' if len(unsure) == 1 else 'them'}, so it may place {'it' if len(unsure) == 1 else 'them'}"
            " elsewhere and change this result.")
    return replace_fields(result, depends_on=named, message=result.message + note)


def replica_pods(pod: Pod, replicas: int) -> list[Pod]:
    """N copies with distinct names and uids (``replica_name``); a single replica is the pod itself."""
    if replicas == 1:
        return [pod]
    return [replace_fields(pod, name=replica_name(pod.name, i, replicas),
                           uid=replica_name(pod.uid, i, replicas) if pod.uid else "")
            for i in range(replicas)]


def resolve_priority(state: ClusterState, pod: Pod) -> Pod:
    """The pod as the Priority admission plugin would store it; raises ``PriorityRejection``."""
    resolved = resolve_pod_priority(pod.priority_class_name, pod.priority, pod.preemption_policy,
                                    effective_classes(state))
    if (resolved.priority == pod.priority and resolved.preemption_policy == pod.preemption_policy
            and resolved.priority_class_name == pod.priority_class_name):
        return pod
    return replace_fields(pod, priority=resolved.priority, preemption_policy=resolved.preemption_policy,
                          priority_class_name=resolved.priority_class_name)


def _rejected(pod: Pod, message: str, priority: int | None = None) -> PreemptionResult:
    return PreemptionResult(pod=pod.key, priority=priority, priority_class_name=pod.priority_class_name,
                            preemption_policy=pod.preemption_policy or PREEMPT_LOWER_PRIORITY,
                            outcome=Outcome.REJECTED, message=message)


def resolve_each(state: ClusterState, pods: Sequence[Pod], deadline: Deadline | None = None,
                 quota_check: PodQuotaCheck = resource_quota_only) -> list[Pod | PreemptionResult]:
    """Each pod as the API server would store it, or its own ``Rejected`` result: the API server's admission
    chain in its order (``webhook.priority.chain``: NamespaceLifecycle, LimitRanger, Priority,
    DefaultTolerationSeconds, RuntimeClass, then the quota stage ``quota_check``, by default the ResourceQuota
    plugin), each admitted pod charged against its namespace's quotas before the next is checked."""
    return [entry.pod if isinstance(entry, Admitted) else entry
            for entry in _admit_each(state, pods, deadline, quota_check)]


def _admit_each(state: ClusterState, pods: Sequence[Pod], deadline: Deadline | None,
                quota_check: PodQuotaCheck) -> list[Admitted | PreemptionResult]:
    def check_deadline(i: int) -> None:
        if deadline is not None and not i % DEADLINE_STRIDE:
            deadline.check()

    return [entry if isinstance(entry, Admitted) else _rejected(entry.pod, entry.message, entry.priority)
            for entry in admit_pods(state, pods, quota_check, check_deadline)]


def _not_known_note(not_known: Sequence[str]) -> str:
    """What could not be applied or checked because the state lacks a kind (an older snapshot)."""
    return f" Not known: {'; '.join(not_known)}." if not_known else ""


def predict_pods(state: ClusterState, pods: Sequence[Pod], *, args: PreemptionArgs | None = None,
                 deadline: Deadline | float | None = None, index: StateIndex | None = None,
                 quota_check: PodQuotaCheck = resource_quota_only) -> list[PreemptionResult]:
    """Admit each pod as the API server would (``resolve_each``), then simulate the admitted ones in order
    (``simulate_pods``).

    Each pod gets its own outcome: a pod the API server refuses is ``Rejected`` and takes no place in the
    simulation of the others. What the admission chain could not apply is said in the message (``Not known``).
    """
    deadline = Deadline.of(deadline)
    if args is not None and not args.pod_level_resources:  # dropped on create, before the admission chain
        pods = [without_pod_level_resources(p) for p in pods]
    entries = _admit_each(state, pods, deadline, quota_check)
    admitted = [e.pod for e in entries if isinstance(e, Admitted)]
    simulated = iter(simulate_pods(state, admitted, args, deadline=deadline, index=index) if admitted else ())
    results = []
    for entry in entries:
        if not isinstance(entry, Admitted):
            results.append(entry)
            continue
        result = next(simulated)
        if entry.not_known:
            result = replace_fields(result, message=result.message + _not_known_note(entry.not_known))
        results.append(result)
    return results


def with_priority_class(pod: Pod, priority_class: str | None) -> Pod:
    """The pod as if it asked for ``priority_class`` (its own spec.priority/preemptionPolicy are dropped)."""
    if not priority_class:
        return pod
    return replace_fields(pod, priority_class_name=priority_class, priority=None, preemption_policy=None)


def predict_objects(state: ClusterState, objects: Iterable[Mapping[str, Any]], *, namespace: str | None = None,
                    replicas: int | None = None, priority_class: str | None = None,
                    args: PreemptionArgs | None = None, deadline: Deadline | float | None = None,
                    index: StateIndex | None = None, max_pods: int = MAX_PODS_PER_REQUEST,
                    quota_check: PodQuotaCheck = resource_quota_only) -> list[PreemptionResult]:
    """Expand every object (Pod, workload or List) into pods (``expand_objects``: at most ``max_pods`` in all,
    counted before any is built) and predict them all in order (``predict_pods``).

    ``deadline``: once it passes (or is cancelled) the simulation raises ``PredictionTimeout``.
    """
    nodes = list(state.nodes.values())  # a DaemonSet's pods: one per eligible node
    pods = [with_priority_class(p, priority_class)
            for p in expand_objects(objects, namespace=namespace, replicas=replicas, nodes=nodes, max_pods=max_pods)]
    return predict_pods(state, pods, args=args, deadline=deadline, index=index, quota_check=quota_check)
