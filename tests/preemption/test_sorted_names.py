"""``SortedNames`` (index.py) kept in blocks: every read equals the same read of one flat sorted list of (value,
name) pairs, through adds and discards that split blocks, empty them and move entries across their edges."""

from __future__ import annotations

import bisect
import random

import pytest

from webhook.preemption.framework.index import SortedNames


class FlatReference:
    """What the ordering means, written the slow obvious way."""

    def __init__(self, pairs: list[tuple[int, str]]) -> None:
        self.pairs = sorted(pairs)

    def add(self, value: int, name: str) -> None:
        bisect.insort(self.pairs, (value, name))

    def discard(self, value: int, name: str) -> None:
        if (value, name) in self.pairs:
            self.pairs.remove((value, name))

    def at_least(self, value: int) -> list[str]:
        return [n for v, n in self.pairs if v >= value]

    def below(self, value: int) -> list[str]:
        return [n for v, n in self.pairs if v < value]


def assert_same(order: SortedNames, reference: FlatReference, probes: list[int]) -> None:
    assert list(zip(order.values, order.names, strict=True)) == reference.pairs
    assert len(order) == len(reference.pairs)
    assert list(order.descending()) == reference.pairs[::-1]
    # What keeps a move cheap: no block past twice BLOCK entries, and none left empty to walk over.
    sizes = [len(block) for block in order._values]
    assert all(0 < size <= 2 * SortedNames.BLOCK for size in sizes), sizes
    for value in probes:
        assert order.at_least(value) == reference.at_least(value), value
        assert order.below(value) == reference.below(value), value
        assert order.count_at_least(value) == len(reference.at_least(value)), value
        assert order.count_below(value) == len(reference.below(value)), value


@pytest.mark.parametrize("seed", range(6))
def test_blocks_read_as_one_sorted_list_through_moves_splits_and_emptied_blocks(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SortedNames, "BLOCK", 4)  # splits and emptied blocks within a few dozen entries
    rng = random.Random(seed)
    # Few distinct values: long runs of ties, ordered by name, across block edges.
    current = {f"node-{i:03d}": rng.randrange(6) for i in range(40)}
    order = SortedNames((v, n) for n, v in current.items())
    reference = FlatReference([(v, n) for n, v in current.items()])
    probes = list(range(-1, 8))
    assert_same(order, reference, probes)
    for step in range(400):
        name = f"node-{rng.randrange(60):03d}"
        action = rng.random()
        if name in current and action < 0.6:  # a node's value moves, as in StateIndex._replace_summary
            new = rng.randrange(6)
            order.discard(current[name], name)
            reference.discard(current[name], name)
            order.add(new, name)
            reference.add(new, name)
            current[name] = new
        elif name in current:  # the node goes
            value = current.pop(name)
            order.discard(value, name)
            reference.discard(value, name)
        else:  # a node comes
            current[name] = rng.randrange(6)
            order.add(current[name], name)
            reference.add(current[name], name)
        order.discard(99, name)  # a pair that is not there: no change
        if step % 20 == 0 or len(current) < 3:
            assert_same(order, reference, probes)
    assert_same(order, reference, probes)
    while current:  # down to nothing, then up again
        name, value = current.popitem()
        order.discard(value, name)
        reference.discard(value, name)
    assert_same(order, reference, probes)
    order.add(3, "node-x")
    reference.add(3, "node-x")
    assert_same(order, reference, probes)
