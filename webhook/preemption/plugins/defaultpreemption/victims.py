"""DefaultPreemption's ``SelectVictimsOnNode`` (default_preemption.go, docs/preemption.md §7): remove every
lower-priority pod, then reprieve greedily; the PDB-violating group is reprieved first, each group most important
first; the victims are finally re-sorted by importance (v1.32+, #128307).

``select_victims_on_node`` runs the profile's Filter plugins on a ``NodeInfo``; beside it,
``select_victims_by_resources`` gives the same answer for a resource-only pod with running totals over the node's
summary.
"""

from __future__ import annotations

from webhook.cluster.model import Pod
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.pdb import PdbIndex, classify_violations
from webhook.preemption.framework.preemption import Candidate, VictimSelection, victim_selection
from webhook.preemption.framework.runtime import Framework
from webhook.preemption.framework.status import OK, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.framework.summary import NodeSummary
from webhook.preemption.framework.types import NodeInfo, importance_key
from webhook.preemption.plugins.noderesources import fits_after_freeing, resource_fit_status

ERR_NO_VICTIMS = "No preemption victims found for incoming pod"
NO_VICTIMS = Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_NO_VICTIMS,))


def potential_victims(pod: Pod, pods: list[Pod]) -> list[Pod]:
    """Pods of strictly lower priority, most important first."""
    priority = pod.effective_priority
    return sorted((p for p in pods if p.effective_priority < priority), key=importance_key)


def select_victims_on_node(framework: Framework, cycle: CycleState, pod: Pod, info: NodeInfo, nominated: list[Pod],
                           pdbs: PdbIndex) -> VictimSelection:
    """The general dry run on one node; works on copies of ``info`` and ``cycle``."""
    potential = potential_victims(pod, list(info.pods.values()))
    if not potential:
        return VictimSelection(None, NO_VICTIMS)
    info = info.copy()
    cycle = cycle.copy()
    for victim in potential:
        info.remove(victim)
        framework.run_pre_filter_extension_remove_pod(cycle, pod, victim, info)
    status = framework.run_filter_plugins_with_nominated_pods(cycle, pod, info, nominated)
    if not status.ok:
        return VictimSelection(None, status)
    flags = pdbs.classify(potential)
    victims: list[Pod] = []
    violating: set[str] = set()

    def reprieve(candidate: Pod) -> bool:
        info.add(candidate)
        framework.run_pre_filter_extension_add_pod(cycle, pod, candidate, info)
        if framework.run_filter_plugins_with_nominated_pods(cycle, pod, info, nominated).ok:
            return True
        info.remove(candidate)
        framework.run_pre_filter_extension_remove_pod(cycle, pod, candidate, info)
        victims.append(candidate)
        return False

    for victim, bad in zip(potential, flags, strict=True):
        if bad and not reprieve(victim):
            violating.add(victim.key)
    for victim, bad in zip(potential, flags, strict=True):
        if not bad:
            reprieve(victim)
    victims.sort(key=importance_key)
    return victim_selection(Candidate(info.node.name, tuple(victims), frozenset(violating), len(violating)), status)


def select_victims_by_resources(pod: Pod, summary: NodeSummary, nominated: list[Pod], pdbs: PdbIndex, *,
                                levels_below: int | None = None) -> VictimSelection:
    """``select_victims_on_node`` for a resource-only pod, with running totals over the node's summary.

    ``levels_below``: how many of the node's priority levels are below the pod's, when the caller knows.
    """
    below = summary.lower_priority_count(pod.effective_priority) if levels_below is None else levels_below
    if below == 0:
        return VictimSelection(None, NO_VICTIMS)
    used = summary.used_with(nominated)
    freed = summary.cumulative[below - 1]
    req = pod.requests
    alloc = summary.node.allocatable
    used_cpu, used_mem, used_eph, used_pods = used
    freed_cpu, freed_mem, freed_eph, freed_pods = freed
    if not fits_after_freeing(req, alloc, used, freed):
        return VictimSelection(None, resource_fit_status(req, alloc, used_cpu - freed_cpu, used_mem - freed_mem,
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
    return victim_selection(Candidate(summary.node.name, tuple(victims), violating, len(violating)), OK)
