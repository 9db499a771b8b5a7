"""SECURITY.md's table of the hostile-tenant attacks (issue #24) names, for each attack, the tests that show its
control and the bench/hostile.py attack that measures it: every one of them must exist, so the table cannot
cite a test or an attack that was renamed or removed."""

from __future__ import annotations

import re
from pathlib import Path

from bench.hostile import ATTACKS

REPO = Path(__file__).resolve().parents[1]
TABLE_HEADING = "## The hostile-tenant attacks (issue #24), their controls and their tests"


def table_rows() -> list[list[str]]:
    text = (REPO / "SECURITY.md").read_text(encoding="utf-8")
    section = text[text.index(TABLE_HEADING):]
    rows = [line for line in section.splitlines() if line.startswith("| ")][2:]  # past the header and its rule
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def cited_tests(cell: str) -> list[tuple[str, str]]:
    """``(file, test)`` for each `path::test` of a cell; a `::test` alone is in the file cited before it."""
    cited, path = [], ""
    for reference in re.findall(r"`([^`]*::[^`]+)`", cell):
        file, _, name = reference.partition("::")
        path = file or path
        cited.append((path, name))
    return cited


def test_every_row_cites_tests_that_exist() -> None:
    rows = table_rows()
    assert len(rows) >= 28  # every attack of the issue, the smaller ones included
    for attack, _control, tests, _bench in rows:
        cited = cited_tests(tests)
        assert cited, f"no test cited for: {attack}"
        for file, name in cited:
            source = (REPO / file).read_text(encoding="utf-8")
            assert re.search(rf"^(async )?def {re.escape(name)}\(", source, re.MULTILINE), f"{file}::{name}"


def test_every_bench_attack_cited_exists() -> None:
    names = {attack.name for attack in ATTACKS} | {"sigterm"}
    cited = {name for row in table_rows() for name in re.findall(r"`([a-z0-9.-]+)`", row[3])}
    assert cited and cited <= names, cited - names
    # and every attack the bench runs is in the table
    assert names <= cited, names - cited
