"""Fixtures of the manifest tests: every kustomization, every overlay."""

from __future__ import annotations

import pytest
from manifest_build import KUSTOMIZATIONS, OVERLAYS


@pytest.fixture(params=KUSTOMIZATIONS)
def kustomization(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    return str(request.param)
