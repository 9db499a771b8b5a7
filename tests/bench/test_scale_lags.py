"""bench/scale.py's informer-lag arithmetic (``lags_seen``): each churn write against the first sighting of its
resourceVersion, by the webhook's gauge polls or by the bare watch's arrivals."""

from __future__ import annotations

import math

from bench.scale import lags_seen

MS = 1_000_000  # ns


def test_a_sighting_after_the_answer_is_the_lag() -> None:
    lags = lags_seen([10 * MS, 30 * MS], [5, 7], [{"rv": 7, "ack": 20 * MS}])
    assert lags == [0.010]


def test_a_sighting_before_the_answer_is_no_lag_even_for_the_last_write() -> None:
    # The watch delivered rv 7 at 15 ms, the writer had its answer at 20 ms, and nothing came after: lag 0, not inf.
    assert lags_seen([10 * MS, 15 * MS], [5, 7], [{"rv": 7, "ack": 20 * MS}]) == [0.0]


def test_a_later_resource_version_covers_an_earlier_write() -> None:
    # A gauge poll sees only the newest resourceVersion applied: rv 9 at 40 ms means rv 8 was applied by then.
    assert lags_seen([10 * MS, 40 * MS], [5, 9], [{"rv": 8, "ack": 25 * MS}]) == [0.015]


def test_a_write_never_seen_is_inf_and_early_writes_are_left_out() -> None:
    records = [{"rv": 4, "ack": 1 * MS}, {"rv": 12, "ack": 20 * MS}]
    [lag] = lags_seen([10 * MS], [5], records, after_ns=5 * MS)
    assert math.isinf(lag)
