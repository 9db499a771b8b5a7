"""bench/scale.py's phases in windows that take turns (``--rounds``): a phase's percentiles are over every window's
probes, not the last window's."""

from __future__ import annotations

from collections.abc import Iterator

from bench.scale import KINDS, Latencies, latency_figures


class ScriptedProber:
    """Answers each call with the next latency of its script; warm-ups are not probes."""

    def __init__(self, latencies: Iterator[float]) -> None:
        self.latencies = latencies
        self.warmed = 0

    def warm_up(self, endpoint: str, kind: str) -> None:
        self.warmed += 1

    def call(self, endpoint: str, kind: str) -> float:
        return next(self.latencies)


def test_a_second_window_adds_to_the_first_and_the_percentiles_are_over_both() -> None:
    found: Latencies = {}
    calls = 2 * len(KINDS)  # mutate and preview, each kind, per round
    first = latency_figures(ScriptedProber(iter([1.0] * 60 * calls)), 60, found=found)
    assert first["mutate fit p99"] == 1.0 and first["probe samples"] == 60
    # The second window is slow throughout: alone its p50 would be 9 ms; over both windows (60 fast, 40 slow) it
    # is the first's, and the p99 the second's.
    second = latency_figures(ScriptedProber(iter([9.0] * 40 * calls)), 40, found=found)
    assert second["probe samples"] == 100
    assert len(found[("mutate", "fit")]) == 100 and len(found[("preview", "unschedulable")]) == 100
    assert second["mutate fit p50"] == 1.0
    assert second["mutate fit p99"] == 9.0


def test_without_found_each_call_stands_alone() -> None:
    figures = latency_figures(ScriptedProber(iter([4.0] * 10 * 2 * len(KINDS))), 10)
    assert figures["probe samples"] == 10 and figures["preview preempt p50"] == 4.0
