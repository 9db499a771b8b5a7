"""tests/vectors/defaulttolerationseconds.yaml: the tolerations a pod leaves DefaultTolerationSeconds with."""

from __future__ import annotations

from typing import Any

import pytest

from tests.priority.chain_vectors import load
from webhook.cluster.reader_constraints import checked_tolerations
from webhook.priority.defaulttolerationseconds import default_toleration_seconds

VECTORS = load("defaulttolerationseconds.yaml")


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"][:60] for c in VECTORS])
def test_default_toleration_seconds(case: dict[str, Any]) -> None:
    tolerations = checked_tolerations(case["tolerations"], "tolerations")
    assert default_toleration_seconds(tolerations) == checked_tolerations(case["expect"]["tolerations"], "expect")
