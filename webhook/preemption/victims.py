"""``SelectVictimsOnNode`` (docs/preemption.md §7): remove every lower-priority pod, then reprieve greedily.

pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go (SelectVictimsOnNode). The
PDB-violating group is reprieved first, each group most important first; the victims are finally re-sorted
by importance (v1.32+, #128307). ``select_victims_on_node`` runs every Filter plugin on a NodeInfo;
``select_victims_by_resources`` gives the same answer for resource-only pods with running totals.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from webhook.cluster.model import Pod, Resources
from webhook.preemption.filters import ERR_NO_VICTIMS, ERROR, OK, UNRESOLVABLE, NodeInfo, Status, resource_fit_status
from webhook.preemption.pdb import PdbIndex, classify_violations
from webhook.preemption.prefilter import CycleState, status_with_nominated
from webhook.preemption.results import Candidate, importance_key
from webhook.preemption.summary import NodeSummary, Usage


@dataclass(frozen=True, slots=True)
class DryRunOutcome:
    """A candidate, or the status explaining why the node is not one."""

    candidate: Candidate | None
    status: Status


NO_VICTIMS = Status(UNRESOLVABLE, (ERR_NO_VICTIMS,))


@dataclass(slots=True)
class DryRun:
    """The dry run over the potential nodes: candidates found (all of them when exhaustive), the best and the
    nodes tying with it, and the status of each node that is not a candidate.

    The bounded search (search.py) fills ``statuses`` only when no node is a candidate (the only time they are read).
    """

    candidates: list[Candidate]
    statuses: dict[str, Status]
    candidate_count: int
    best: Candidate | None = None
    tied: tuple[str, ...] = ()
    # How many nodes have each status in ``statuses``, when the dry run counted them already.
    counts: Counter[Status] | None = None


def no_victim_error(node_name: str) -> Status:
    """DryRunPreemption's Error for a node where victim selection succeeded but evicts nobody."""
    return Status(ERROR, (f'expected at least one victim pod on node "{node_name}"',))


def candidate_outcome(candidate: Candidate, status: Status) -> DryRunOutcome:
    """The dry run's answer for a node, refusing a candidate without victims as upstream does."""
    if not candidate.victims:
        return DryRunOutcome(None, no_victim_error(candidate.node))
    return DryRunOutcome(candidate, status)


def potential_victims(pod: Pod, pods: list[Pod]) -> list[Pod]:
    """Pods of strictly lower priority, most important first."""
    priority = pod.effective_priority
    return sorted((p for p in pods if p.effective_priority < priority), key=importance_key)


def select_victims_on_node(pod: Pod, info: NodeInfo, cycle: CycleState, nominated: list[Pod],
                           pdbs: PdbIndex) -> DryRunOutcome:
    """The general dry run on one node; works on copies of ``info`` and ``cycle``."""
    potential = potential_victims(pod, list(info.pods.values()))
    if not potential:
        return DryRunOutcome(None, NO_VICTIMS)
    info = info.copy()
    cycle = cycle.copy()
    node = info.node
    for victim in potential:
        info.remove(victim)
        cycle.remove_pod(victim, node)
    status = status_with_nominated(pod, info, cycle, nominated)
    if not status.ok:
        return DryRunOutcome(None, status)
    flags = pdbs.classify(potential)
    victims: list[Pod] = []
    violating: set[str] = set()

    def reprieve(candidate: Pod) -> bool:
        info.add(candidate)
        cycle.add_pod(candidate, node)
        if status_with_nominated(pod, info, cycle, nominated).ok:
            return True
        info.remove(candidate)
        cycle.remove_pod(candidate, node)
        victims.append(candidate)
        return False

    for victim, bad in zip(potential, flags, strict=True):
        if bad and not reprieve(victim):
            violating.add(victim.key)
    for victim, bad in zip(potential, flags, strict=True):
        if not bad:
            reprieve(victim)
    victims.sort(key=importance_key)
    return candidate_outcome(Candidate(node.name, tuple(victims), frozenset(violating), len(violating)), status)


def fits_after_freeing(requests: Resources, alloc: Resources, used: Usage, freed: Usage) -> bool:
    """NodeResourcesFit for a resource-only pod on a node using ``used`` once ``freed`` is gone."""
    used_cpu, used_mem, used_eph, used_pods = used
    freed_cpu, freed_mem, freed_eph, freed_pods = freed
    return (used_pods - freed_pods + 1 <= alloc.pods
            and (requests.milli_cpu == 0 or requests.milli_cpu <= alloc.milli_cpu - used_cpu + freed_cpu)
            and (requests.memory == 0 or requests.memory <= alloc.memory - used_mem + freed_mem)
            and (requests.ephemeral_storage == 0
                 or requests.ephemeral_storage <= alloc.ephemeral_storage - used_eph + freed_eph))


def select_victims_by_resources(pod: Pod, summary: NodeSummary, nominated: list[Pod], pdbs: PdbIndex, *,
                                levels_below: int | None = None) -> DryRunOutcome:
    """``select_victims_on_node`` for a resource-only pod, with running totals over the node's summary.

    ``levels_below``: how many of the node's priority levels are below the pod's, when the caller knows.
    """
    below = summary.lower_priority_count(pod.effective_priority) if levels_below is None else levels_below
    if below == 0:
        return DryRunOutcome(None, NO_VICTIMS)
    used = summary.used_with(nominated)
    freed = summary.cumulative[below - 1]
    req = pod.requests
    alloc = summary.node.allocatable
    used_cpu, used_mem, used_eph, used_pods = used
    freed_cpu, freed_mem, freed_eph, freed_pods = freed
    if not fits_after_freeing(req, alloc, used, freed):
        return DryRunOutcome(None, resource_fit_status(req, alloc, used_cpu - freed_cpu, used_mem - freed_mem,
                                                       used_eph - freed_eph, used_pods - freed_pods, {}))
    first = len(summary.pods) - freed_pods
    potential = summary.pods[first:]
    matches = summary.pdb_matches(pdbs)[first:]
    flags = classify_violations(matches, pdbs.budgets, stop_at_first=pdbs.stop_at_first) if any(matches) else None
    order = potential if flags is None else (
        [p for p, bad in zip(potential, flags, strict=True) if bad]
        + [p for p, bad in zip(potential, flags, strict=True) if not bad])
    # What stays free once the pod is placed and every potential victim is gone; reprieved pods take it back.
    free_cpu = alloc.milli_cpu - used_cpu + freed_cpu - req.milli_cpu
    free_mem = alloc.memory - used_mem + freed_mem - req.memory
    free_eph = alloc.ephemeral_storage - used_eph + freed_eph - req.ephemeral_storage
    free_pods = alloc.pods - used_pods + freed_pods - 1
    check_cpu, check_mem, check_eph = req.milli_cpu > 0, req.memory > 0, req.ephemeral_storage > 0
    victims: list[Pod] = []
    for other in order:
        r = other.requests
        if (free_pods >= 1 and (not check_cpu or free_cpu >= r.milli_cpu) and (not check_mem or free_mem >= r.memory)
                and (not check_eph or free_eph >= r.ephemeral_storage)):
            free_pods -= 1
            free_cpu -= r.milli_cpu
            free_mem -= r.memory
            free_eph -= r.ephemeral_storage
        else:
            victims.append(other)
    violating: frozenset[str] = frozenset()
    if flags is not None:
        bad_keys = {p.key for p, bad in zip(potential, flags, strict=True) if bad}
        violating = frozenset(v.key for v in victims if v.key in bad_keys)
        victims.sort(key=importance_key)
    return candidate_outcome(Candidate(summary.node.name, tuple(victims), violating, len(violating)), OK)
