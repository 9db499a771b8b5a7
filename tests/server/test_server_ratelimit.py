"""Per-caller token buckets for dry-run probing (``prediction.previewsPerMinute``)."""

from __future__ import annotations

from webhook.server.ratelimit import CallerRateLimit, retry_after_header


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_caller_gets_a_minutes_worth_at_once_then_one_per_refill_interval() -> None:
    clock = Clock()
    limit = CallerRateLimit(lambda: 6, clock=clock)
    assert [limit.take("alice") for _ in range(6)] == [None] * 6
    wait = limit.take("alice")
    assert wait is not None and abs(wait - 10.0) < 1e-9  # 6 per minute: one every 10 s
    assert limit.take("bob") is None  # buckets are per caller
    clock.now += 10.0
    assert limit.take("alice") is None and limit.take("alice") is not None
    clock.now += 3600.0  # a full bucket never holds more than a minute's worth
    assert [limit.take("alice") for _ in range(7)].count(None) == 6


def test_zero_turns_the_limit_off_and_the_rate_follows_the_configuration() -> None:
    rate = [0]
    limit = CallerRateLimit(lambda: rate[0], clock=Clock())
    assert all(limit.take("alice") is None for _ in range(1000))
    rate[0] = 1
    assert limit.take("alice") is None and limit.take("alice") is not None


def test_forged_callers_cannot_grow_the_table() -> None:
    limit = CallerRateLimit(lambda: 60, max_callers=100, clock=Clock())
    for i in range(10_000):
        limit.take(f"forged-{i}")
    assert len(limit._buckets) == 100


def test_retry_after_is_whole_seconds_and_at_least_one() -> None:
    assert [retry_after_header(s) for s in (0.01, 1.0, 1.2, 59.5)] == ["1", "1", "2", "60"]


def test_the_same_question_again_soon_is_free_and_a_new_one_is_charged() -> None:
    clock = Clock()
    limit = CallerRateLimit(lambda: 2, repeat_seconds=10.0, clock=clock)
    assert limit.take("alice", "pod-a") is None and limit.take("alice", "pod-b") is None
    assert all(limit.take("alice", "pod-a") is None for _ in range(50))  # replicas of one pod: free
    assert limit.take("alice", "pod-c") is not None  # a new probe: no token left
    assert limit.take("bob", "pod-a") is None  # per caller
    clock.now += 31.0  # past the window the same question is charged again (one token refilled meanwhile)
    assert limit.take("alice", "pod-a") is None and limit.take("alice", "pod-a") is None
    assert limit.take("alice", "pod-b") is not None
