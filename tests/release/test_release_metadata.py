"""Release hygiene: the package metadata and the changelog's Keep a Changelog shape."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def project() -> dict[str, object]:
    return dict(tomllib.loads((REPO / "pyproject.toml").read_text())["project"])


def test_package_metadata_has_classifiers_and_urls() -> None:
    meta = project()
    classifiers = meta["classifiers"]
    assert isinstance(classifiers, list)
    minimum = str(meta["requires-python"]).removeprefix(">=")
    assert f"Programming Language :: Python :: {minimum}" in classifiers
    assert "Programming Language :: Python :: 3 :: Only" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers), "the SPDX `license` field says it (PEP 639)"
    urls = meta["urls"]
    assert isinstance(urls, dict) and {"Homepage", "Source", "Issues", "Changelog"} <= urls.keys()
    assert all(str(url).startswith("https://") for url in urls.values())


def test_changelog_follows_keep_a_changelog() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n") and "keepachangelog.com" in text
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.MULTILINE)
    assert releases[0] == ("Unreleased", "")
    assert all(date for version, date in releases[1:]), "every released version has a date"
    versions = [version for version, _ in releases]
    assert str(project()["version"]) in versions or "Unreleased" in versions
    sections = set(re.findall(r"^### (.+)$", text, re.MULTILINE))
    assert sections <= SECTIONS, sections - SECTIONS
    for version in versions:  # every heading links to its comparison or tag
        assert re.search(rf"^\[{re.escape(version)}\]: https://", text, re.MULTILINE), version
