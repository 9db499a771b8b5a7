"""The checks that the Helm chart's rendering must pass too (tests/manifests/checks.py), on every overlay."""

from __future__ import annotations

from checks import check_all
from manifest_build import COMPONENTS, build, with_components


def test_every_overlay_passes_the_shared_checks(overlay: str) -> None:
    check_all(build(overlay), overlay)


def test_overlays_with_every_component_pass_the_shared_checks() -> None:
    for overlay in ("overlays/self-signed", "overlays/cert-manager"):
        check_all(with_components(overlay, *COMPONENTS), f"{overlay} + components")
