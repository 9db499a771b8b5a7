"""One node's bound pods summarised for resource arithmetic: totals per priority level, what is free.

The predictor's fast paths (docs/preemption.md §7 for resource-only pods) read these sums instead of walking
the node's pods; ``StateIndex`` (index.py) keeps one per node up to date.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from webhook.cluster.model import Node, Pod
from webhook.preemption.framework.pdb import PdbIndex
from webhook.preemption.framework.types import START_NOW_NS, importance_key, start_key

# What the pods of a node request, or what is free on it: (milli_cpu, memory, ephemeral_storage, pods), read with
# the dimension constants (``used[PODS]``) or unpacked. A plain tuple: the index keeps seven per node, and the
# garbage collector stops tracking tuples of ints, not NamedTuples (27,000 more tracked objects at 5,000 nodes
# were enough to set off a full collection after the first prediction).
Usage = tuple[int, int, int, int]
CPU, MEMORY, EPHEMERAL, PODS = 0, 1, 2, 3
NO_USAGE: Usage = (0, 0, 0, 0)
NO_PODS_LEVEL = 2**63  # the lowest priority of a node without pods: nothing is below any preemptor


@dataclass(slots=True)
class NodeSummary:
    """One node's bound pods, most important first, with totals per priority level.

    ``levels`` are the distinct pod priorities ascending; ``cumulative[i]`` is what the pods with priority
    <= ``levels[i]`` request; ``free`` is the node's allocatable minus what its pods request.
    """

    node: Node
    pods: list[Pod]
    used: Usage
    levels: list[int]
    cumulative: list[Usage]
    has_scalar: bool
    # Latest start (unset = now) among the pods of each level.
    level_latest_start: list[int]
    free: Usage = NO_USAGE
    # What the scheduler's scoring sums (NodeInfo.NonZeroRequested): (milli cpu, memory), a container without a
    # request counting 100m / 200 MiB (``Pod.non_zero``).
    non_zero_used: tuple[int, int] = (0, 0)
    _pdb_matches: tuple[PdbIndex, list[tuple[int, ...]]] | None = None
    _largest_first: dict[int, tuple[list[int], list[int], list[int]]] = dataclasses.field(default_factory=dict)
    # NodeResourcesBalancedAllocation's score of the node without the scored pod (its node and ``used`` never change
    # in a summary): -1 until one scoring computes it (balanced_allocation.balanced_pair_scores).
    balanced_without_pod: int = -1

    def __reduce__(self) -> tuple[type[NodeSummary], tuple[object, ...]]:
        """Pickled (the snapshot cache, snapshot_cache.py) without the PDB matches of a past prediction."""
        return NodeSummary, (self.node, self.pods, self.used, self.levels, self.cumulative, self.has_scalar,
                             self.level_latest_start, self.free, self.non_zero_used, None, self._largest_first)

    @classmethod
    def build(cls, node: Node, pods: list[Pod]) -> NodeSummary:
        ordered = sorted(pods, key=importance_key)
        per_level: dict[int, list[int]] = {}
        latest: dict[int, int] = {}
        cpu = mem = eph = 0
        non_zero_cpu = non_zero_mem = 0
        has_scalar = False
        for pod in ordered:
            req = pod.requests
            cpu += req.milli_cpu
            mem += req.memory
            eph += req.ephemeral_storage
            non_zero = pod.non_zero_requests
            if non_zero is None:
                non_zero_cpu += req.milli_cpu
                non_zero_mem += req.memory
            else:
                non_zero_cpu += non_zero[0]
                non_zero_mem += non_zero[1]
            has_scalar = has_scalar or bool(req.scalar)
            priority = pod.effective_priority
            acc = per_level.get(priority)
            if acc is None:
                acc = per_level[priority] = [0, 0, 0, 0]
            acc[CPU] += req.milli_cpu
            acc[MEMORY] += req.memory
            acc[EPHEMERAL] += req.ephemeral_storage
            acc[PODS] += 1
            started = start_key(pod)
            if started > latest.get(priority, 0):
                latest[priority] = started
        levels = sorted(per_level)
        cumulative: list[Usage] = []
        run_cpu = run_mem = run_eph = run_pods = 0
        for level in levels:
            acc = per_level[level]
            run_cpu += acc[CPU]
            run_mem += acc[MEMORY]
            run_eph += acc[EPHEMERAL]
            run_pods += acc[PODS]
            cumulative.append((run_cpu, run_mem, run_eph, run_pods))
        alloc = node.allocatable
        count = len(ordered)
        free = (alloc.milli_cpu - cpu, alloc.memory - mem, alloc.ephemeral_storage - eph, alloc.pods - count)
        return cls(node, ordered, (cpu, mem, eph, count), levels, cumulative, has_scalar,
                   [latest.get(level, 0) for level in levels], free, (non_zero_cpu, non_zero_mem))

    def patched(self, node: Node, pods: list[Pod]) -> NodeSummary | None:
        """``build(node, pods)``, from this summary, when ``pods`` are ours give or take one pod added or removed, the
        others the same as ours in what ``build`` reads (uid, priority, start, requests); None otherwise (the same
        node required). Most watch events of a live cluster are like that: a pod updated in its labels, annotations
        or conditions (the sums and orderings kept, the new pod objects swapped in), created or deleted (one pod's
        requests added to or taken from the sums of its level and those above). A patch costs a lookup per pod and
        no sort: ``build`` was a third of a watch event's index refresh at 15,000 nodes (cProfile)."""
        if node is not self.node or abs(len(pods) - len(self.pods)) > 1:
            return None
        new = {(pod.namespace, pod.name): pod for pod in pods}
        placed: list[Pod] = []
        gone: Pod | None = None
        for mine in self.pods:
            pod = new.pop((mine.namespace, mine.name), None)
            if pod is None:
                if gone is not None:
                    return None
                gone = mine
            elif pod is not mine and (pod.uid != mine.uid or pod.priority != mine.priority
                                      or pod.start_time_ns != mine.start_time_ns or pod.requests != mine.requests
                                      or pod.non_zero_requests != mine.non_zero_requests):
                return None
            else:
                placed.append(pod)
        if gone is None and not new:
            # The PDBs that count each pod depend on its labels: matched again on first use.
            return NodeSummary(node, placed, self.used, self.levels, self.cumulative, self.has_scalar,
                               self.level_latest_start, self.free, self.non_zero_used, None, self._largest_first)
        if gone is not None and new:
            return None  # one pod in, another out: built anew
        if gone is not None:
            return self._shifted(node, placed, gone, -1)
        (added,) = new.values()
        placed.insert(bisect.bisect_right(placed, importance_key(added), key=importance_key), added)
        return self._shifted(node, placed, added, 1)

    def _shifted(self, node: Node, pods: list[Pod], pod: Pod, sign: int) -> NodeSummary:
        """This summary with ``pod`` added (``sign`` 1) or removed (-1, one of ours, so its level is one of ours);
        ``pods`` already with or without it."""
        req = pod.requests
        if sign < 0 and req.scalar:
            has_scalar = any(p.requests.scalar for p in pods)
        else:
            has_scalar = self.has_scalar or bool(req.scalar)
        d_cpu, d_mem, d_eph = sign * req.milli_cpu, sign * req.memory, sign * req.ephemeral_storage
        cpu, mem, eph, count = self.used
        free_cpu, free_mem, free_eph, free_pods = self.free
        non_zero = pod.non_zero
        levels, cumulative, latest = list(self.levels), list(self.cumulative), list(self.level_latest_start)
        priority = pod.effective_priority
        j = bisect.bisect_left(levels, priority)
        present = j < len(levels) and levels[j] == priority
        started = start_key(pod)
        recount_latest = False
        if sign > 0:
            if not present:
                levels.insert(j, priority)
                cumulative.insert(j, cumulative[j - 1] if j else NO_USAGE)
                latest.insert(j, 0)
            if started > latest[j]:
                latest[j] = started
        elif cumulative[j][PODS] - (cumulative[j - 1][PODS] if j else 0) == 1:  # its level's last pod
            del levels[j], cumulative[j], latest[j]
        else:
            recount_latest = started == latest[j]
        for k in range(j, len(cumulative)):
            run_cpu, run_mem, run_eph, run_pods = cumulative[k]
            cumulative[k] = (run_cpu + d_cpu, run_mem + d_mem, run_eph + d_eph, run_pods + sign)
        if recount_latest:
            # The level's pods lie together in ``pods``, earliest start first: its latest start is its last pod's.
            end = len(pods) - (cumulative[j - 1][PODS] if j else 0)
            latest[j] = max(0, start_key(pods[end - 1]))
        # Running sums of the levels below the pod's own are unchanged; those at or above it are built again.
        largest = {i: sums for i, sums in self._largest_first.items() if i < j}
        return NodeSummary(node, pods, (cpu + d_cpu, mem + d_mem, eph + d_eph, count + sign), levels, cumulative,
                           has_scalar, latest, (free_cpu - d_cpu, free_mem - d_mem, free_eph - d_eph, free_pods - sign),
                           (self.non_zero_used[0] + sign * non_zero[0], self.non_zero_used[1] + sign * non_zero[1]),
                           None, largest)

    def used_with(self, nominated: Sequence[Pod]) -> Usage:
        """What the node's pods and ``nominated`` (pods nominated to it, pass 1 of docs/preemption.md §6) request."""
        if not nominated:
            return self.used
        cpu, mem, eph, count = self.used
        for other in nominated:
            requests = other.requests
            cpu += requests.milli_cpu
            mem += requests.memory
            eph += requests.ephemeral_storage
            count += 1
        return cpu, mem, eph, count

    def lower_priority_count(self, priority: int) -> int:
        """How many distinct levels are strictly below ``priority``."""
        return bisect.bisect_left(self.levels, priority)

    def freed_at_or_below(self, priority: int) -> Usage:
        """What removing every pod with priority <= ``priority`` frees."""
        i = bisect.bisect_right(self.levels, priority)
        return self.cumulative[i - 1] if i else NO_USAGE

    def pdb_matches(self, pdbs: PdbIndex) -> list[tuple[int, ...]]:
        """For each pod (importance order) the PDBs that count it; cached per PDB index."""
        found = self._pdb_matches
        if found is None or found[0] is not pdbs:
            found = (pdbs, [pdbs.matches(p) for p in self.pods])
            self._pdb_matches = found
        return found[1]

    def _level_span(self, level_index: int) -> tuple[int, int]:
        """Where the pods of ``levels[level_index]`` lie in ``pods`` (most important first, so the lowest level
        last): ``pods[first:end]``."""
        count = len(self.pods)
        return (count - self.cumulative[level_index][PODS],
                count - (self.cumulative[level_index - 1][PODS] if level_index else 0))

    def latest_start(self, level_index: int, k: int) -> int:
        """The ``k``-th latest start among the pods of ``levels[level_index]`` (the latest when it has fewer): they
        lie together in ``pods``, earliest first (``importance_key``)."""
        first, end = self._level_span(level_index)
        if k <= 1 or end - first < k:
            return self.level_latest_start[level_index]
        return start_key(self.pods[end - k])

    def latest_start_freeing(self, level_index: int, short_cpu: int, short_mem: int, short_eph: int) -> int | None:
        """The latest start among the pods of ``levels[level_index]`` that free each shortfall alone (a shortfall
        <= 0 asks nothing); None when none does. They lie together in ``pods``, earliest first: the walk starts
        at the latest and stops at the first that frees enough."""
        first, end = self._level_span(level_index)
        pods = self.pods
        for i in range(end - 1, first - 1, -1):
            requests = pods[i].requests
            if (requests.milli_cpu >= short_cpu and requests.memory >= short_mem
                    and requests.ephemeral_storage >= short_eph):
                return start_key(pods[i])
        return None

    def latest_started(self, level_index: int) -> int:
        """The latest start among the pods of ``levels[level_index]`` that have started (-1 without any): the pods
        not started yet (start "now") lie last among them."""
        first, end = self._level_span(level_index)
        pods = self.pods
        for i in range(end - 1, first - 1, -1):
            started = start_key(pods[i])
            if started != START_NOW_NS:
                return started
        return -1

    def largest_unstarted(self, level_index: int, dim: int) -> int | None:
        """The largest request in ``dim`` (1 for ``PODS``: the slot) among the pods of ``levels[level_index]`` not
        started yet; None without any."""
        first, end = self._level_span(level_index)
        pods = self.pods
        largest: int | None = None
        for i in range(end - 1, first - 1, -1):
            pod = pods[i]
            if start_key(pod) != START_NOW_NS:
                break
            requests = pod.requests
            value = (requests.milli_cpu, requests.memory, requests.ephemeral_storage, 1)[dim]
            if largest is None or value > largest:
                largest = value
        return largest

    def largest_first(self, level_index: int) -> tuple[list[int], list[int], list[int]]:
        """Running sums of cpu, memory, ephemeral-storage of the pods at or below a level, largest first."""
        found = self._largest_first.get(level_index)
        if found is None:
            count = self.cumulative[level_index][PODS]
            pods = self.pods[len(self.pods) - count:]
            found = (list(itertools.accumulate(sorted((p.requests.milli_cpu for p in pods), reverse=True))),
                     list(itertools.accumulate(sorted((p.requests.memory for p in pods), reverse=True))),
                     list(itertools.accumulate(sorted((p.requests.ephemeral_storage for p in pods), reverse=True))))
            self._largest_first[level_index] = found
        return found
