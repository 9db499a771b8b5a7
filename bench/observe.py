"""Benchmark: the live observer's memory stays flat once its window is full (docs/interfaces.md §9).

``PredictionTracker`` (webhook/observe/tracker.py) is fed as the server feeds it: one ``follow`` per prediction
made at admission (records shaped like real ones: a random id, a name, a predicted node, victims and tied
nodes), and the pod changes ``ClusterState.pod_listener`` hands it for the pods the scheduler then handles
(without the cluster state itself, whose memory bench/cluster_state.py measures). Time
is simulated: ``--predictions`` predictions arrive evenly over each ``--window`` and the tracker ticks once a
simulated second, for ``--windows`` windows. Two mixes:

* worst case: no pod is ever scheduled, so every prediction is held for the whole window and the tracker
  holds ``--predictions`` at once before the window's end decides them ``unobserved``;
* mixed: 80% are scheduled as predicted (bound within 2 s, or nominated with their victims marked and
  bound within 30 s), 5% are refused (``Unschedulable``), 15% are never scheduled.

First what the tracker costs in time (untraced): per pod event of the informers (``ClusterState.upsert``), and
per prediction from ``follow`` to its decision. Then the traced heap (tracemalloc) at each window's end and at
its middle, the predictions followed then, bytes per followed prediction and the verdicts. Flat: the heap at
the ends of windows 2..N (the window is full from its first end on) is within 5 % of each other.

Usage: python bench/observe.py [--predictions 100000] [--window 600] [--windows 3]
"""

from __future__ import annotations

import argparse
import gc
import random
import secrets
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from webhook.cluster.model import Pod, PredictionTrace  # noqa: E402
from webhook.cluster.snapshot import ClusterState  # noqa: E402
from webhook.observe.compare import Predicted  # noqa: E402
from webhook.observe.tracker import Decision, PredictionRecord, PredictionTracker  # noqa: E402
from webhook.preemption.results import Outcome  # noqa: E402

NODES = [f"pool-{i // 100}-node-{i:04d}" for i in range(1000)]
NAMESPACES = [sys.intern(f"team-{i:02d}") for i in range(40)]
MIB = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Pending:
    """A pod change the simulated scheduler makes, and when."""

    at: float
    old: Pod | None
    new: Pod | None


def record(rng: random.Random, i: int) -> tuple[PredictionRecord, Pod]:
    namespace = rng.choice(NAMESPACES)
    name = f"web-{i:07d}-{secrets.token_hex(3)}"
    node = rng.choice(NODES)
    victims = tuple(f"{rng.choice(NAMESPACES)}/batch-{rng.randrange(10**6)}" for _ in range(rng.choice((0, 1, 2))))
    outcome = Outcome.PREEMPTS if victims else Outcome.FITS
    predicted = Predicted(outcome, node, victims, (node,) if victims else ())
    prediction_id = secrets.token_hex(12)
    pod = Pod(name=name, namespace=namespace, uid=secrets.token_hex(8), priority=1000,
              trace=PredictionTrace(prediction_id))
    return PredictionRecord(prediction_id, namespace, name, 1000, predicted), pod


def scheduler_changes(rng: random.Random, pod: Pod, predicted: Predicted, now: float, mixed: bool) -> list[Pending]:
    """The informer's pod changes for one created pod: as predicted (80%), refused (5%) or never (15%)."""
    if not mixed:
        return []
    trace = pod.trace
    assert trace is not None and predicted.node is not None
    roll = rng.random()
    bound = Pod(name=pod.name, namespace=pod.namespace, uid=pod.uid, node_name=predicted.node, priority=1000)
    if roll < 0.80 and predicted.outcome == Outcome.FITS:
        return [Pending(now + rng.uniform(0.1, 2.0), pod, bound)]
    if roll < 0.80:
        message = f"preemption: found a potential placement, preempting {len(predicted.victims)} victims"
        nominated = Pod(name=pod.name, namespace=pod.namespace, uid=pod.uid, priority=1000,
                        nominated_node_name=predicted.node, trace=PredictionTrace(trace.prediction_id, True, message))
        changes = [Pending(now + 0.5, pod, nominated)]
        for victim in predicted.victims:
            namespace, _, name = victim.partition("/")
            running = Pod(name=name, namespace=namespace, node_name=predicted.node, priority=10)
            marked = Pod(name=name, namespace=namespace, node_name=predicted.node, priority=10,
                         preempted_by_scheduler=True, deleting=True)
            changes += [Pending(now + 0.6, running, marked), Pending(now + rng.uniform(1, 30), marked, None)]
        return [*changes, Pending(now + rng.uniform(5, 30), nominated, bound)]
    if roll < 0.85:
        refused = Pod(name=pod.name, namespace=pod.namespace, uid=pod.uid, priority=1000,
                      trace=PredictionTrace(trace.prediction_id, True, "0/1000 nodes are available"))
        return [Pending(now + 0.5, pod, refused)]
    return []


def run(predictions: int, window: float, windows: int, *, mixed: bool, seed: int,
        report: Callable[[str], None]) -> None:
    rng = random.Random(seed)
    clock = Clock()
    verdicts: Counter[str] = Counter()

    def decided(decision: Decision) -> None:
        verdicts[str(decision.comparison.verdict)] += 1

    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    tracker = PredictionTracker(decided, window_seconds=window, max_predictions=predictions, clock=clock)
    # What ClusterState.pod_listener hands the tracker, without the cluster state itself (its memory is
    # bench/cluster_state.py's): (None, pod) when the informer adds the created pod, then the scheduler's changes.
    listener = tracker.pod_changed
    per_second = predictions / window
    pending: list[Pending] = []
    made = 0
    samples: list[tuple[float, int, int]] = []
    for second in range(int(window * windows)):
        due = int(per_second * (second + 1)) - made
        for _ in range(due):
            rec, pod = record(rng, made)
            made += 1
            tracker.follow(rec)
            listener(None, pod)
            pending.extend(scheduler_changes(rng, pod, rec.predicted, clock.now, mixed))
        clock.now = second + 1.0
        now_due = sorted((p for p in pending if p.at <= clock.now), key=lambda p: p.at)
        pending = [p for p in pending if p.at > clock.now]
        for change in now_due:
            listener(change.old, change.new)
        tracker.tick()
        if (second + 1) % int(window / 2) == 0:
            gc.collect()
            heap, _ = tracemalloc.get_traced_memory()
            samples.append((clock.now, heap - base, len(tracker)))
    tracemalloc.stop()
    name = "mixed" if mixed else "worst case (never scheduled)"
    report(f"{name}: {made} predictions over {windows} windows of {window:g}s ({per_second:.1f}/s)")
    for at, heap, following in samples:
        per = f"({heap / following:5.0f} B each)" if following else ""
        report(f"  t={at:6.0f}s  heap {heap / MIB:7.2f} MiB  following {following:7d}  {per}")
    ends = [heap for at, heap, _ in samples if at % window == 0]
    drift = (max(ends[1:]) - min(ends[1:])) / ends[1] if len(ends) > 2 and ends[1] else 0.0
    report(f"  heap at the end of each window: {', '.join(f'{h / MIB:.2f}' for h in ends)} MiB -> "
           f"{'flat' if drift <= 0.05 else 'GROWING'} once full (windows 2.. spread {drift:.1%})")
    report(f"  verdicts: {dict(sorted(verdicts.items()))}")


def listener_cost(report: Callable[[str], None], events: int = 200_000, following: int = 1000) -> None:
    """What the tracker adds to each informer pod event (``ClusterState.upsert``), best of five runs."""
    pods = [Pod(name=f"p-{i}", namespace=NAMESPACES[i % len(NAMESPACES)], node_name=NODES[i % len(NODES)],
                priority=10, labels={"rev": str(i)}) for i in range(events)]

    def best(state: ClusterState) -> float:
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            for pod in pods:
                state.upsert(pod)
            timings.append(time.perf_counter() - started)
        return min(timings) / events

    plain = best(ClusterState())
    observed = ClusterState()
    tracker = PredictionTracker(lambda decision: None, window_seconds=3600, max_predictions=following)
    for i in range(following):
        tracker.follow(PredictionRecord(f"id-{i}", "team-00", f"web-{i}", 1000, Predicted(Outcome.FITS, NODES[0])))
    observed.pod_listener = tracker.pod_changed
    with_tracker = best(observed)
    report(f"pod listener: ClusterState.upsert {plain * 1e6:.2f} µs per pod event without the tracker, "
           f"{with_tracker * 1e6:.2f} µs with it following {following} predictions "
           f"(+{(with_tracker - plain) * 1e6:.2f} µs; {1 / with_tracker:,.0f} events/s for the state alone)")


def lifecycle_cost(report: Callable[[str], None], predictions: int = 100_000) -> None:
    """One prediction followed, its pod added pending and then bound (three tracker calls and the decision)."""
    rng = random.Random(1)
    made = [record(rng, i) for i in range(predictions)]
    decided: list[Decision] = []
    tracker = PredictionTracker(decided.append, max_predictions=predictions)
    started = time.perf_counter()
    for rec, pod in made:
        tracker.follow(rec)
        tracker.pod_changed(None, pod)
        assert rec.predicted.node is not None
        tracker.pod_changed(pod, Pod(name=pod.name, namespace=pod.namespace, uid=pod.uid,
                                     node_name=rec.predicted.node, priority=1000))
    seconds = time.perf_counter() - started
    assert len(decided) == predictions
    report(f"one prediction from follow to its decision: {seconds / predictions * 1e6:.1f} µs "
           f"({predictions / seconds:,.0f} per second)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--predictions", type=int, default=100_000, help="predictions per window")
    parser.add_argument("--window", type=float, default=600.0)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    listener_cost(print)
    lifecycle_cost(print)
    for mixed in (False, True):
        run(args.predictions, args.window, args.windows, mixed=mixed, seed=args.seed, report=print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
