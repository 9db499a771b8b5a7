"""``SelectVictimsOnNode`` (docs/preemption.md §7): remove every lower-priority pod, then reprieve greedily.

The PDB-violating group is reprieved first, each group most important first; the victims are
finally re-sorted by importance (v1.32+, #128307).
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.cluster.model import Pod
from webhook.preemption.filters import (
    ERR_NO_VICTIMS,
    ERROR,
    UNRESOLVABLE,
    CycleState,
    NodeInfo,
    Status,
    status_with_nominated,
)
from webhook.preemption.pdb import PdbIndex
from webhook.preemption.results import Candidate, importance_key


@dataclass(frozen=True, slots=True)
class DryRunOutcome:
    """A candidate, or the status explaining why the node is not one."""

    candidate: Candidate | None
    status: Status


NO_VICTIMS = Status(UNRESOLVABLE, (ERR_NO_VICTIMS,))


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
