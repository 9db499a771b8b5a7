"""bench/scale.py's per-CPU accounting (``cpu_ticks``): /proc/stat's columns of the chosen CPUs only, summed."""

from __future__ import annotations

from bench.scale import cpu_ticks

STAT = """cpu  2303882 4097840 823123 7266467 47507 0 52373 9784 0 0
cpu0 862345 1875267 355529 4164119 5330 0 22117 5392 0 0
cpu1 1441536 2222572 467594 3102347 42176 7 30255 4391 0 0
intr 12345 0 9 0
ctxt 987654
cpu_other 1 2 3 4 5 6 7 8
"""


def test_one_cpu_is_its_own_line_not_the_aggregate() -> None:
    ticks = cpu_ticks({0}, STAT)
    assert ticks["steal"] == 5392
    assert ticks["softirq"] == 22117
    assert ticks["irq"] == 0
    assert ticks["idle"] == 4164119


def test_several_cpus_are_summed_and_other_lines_ignored() -> None:
    ticks = cpu_ticks({0, 1}, STAT)
    assert ticks["steal"] == 5392 + 4391
    assert ticks["irq"] == 7
    assert ticks["user"] == 862345 + 1441536


def test_a_cpu_not_listed_counts_nothing() -> None:
    assert cpu_ticks({5}, STAT) == dict.fromkeys(cpu_ticks({0}, STAT), 0)
