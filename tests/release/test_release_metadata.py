"""Release hygiene: the package metadata and the changelog's Keep a Changelog shape."""

from __future__ import annotations

import re
import subprocess
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


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


def test_every_released_version_is_a_git_tag_at_its_release() -> None:
    """`v<version>` for each dated CHANGELOG section, on a commit whose pyproject.toml has that version."""
    text = (REPO / "CHANGELOG.md").read_text()
    released = [v for v in re.findall(r"^## \[([^\]]+)\] - \d{4}-\d{2}-\d{2}$", text, re.MULTILINE)]
    assert released
    for version in released:
        commit = git("rev-parse", "--verify", "--quiet", f"refs/tags/v{version}^{{commit}}")
        assert commit.returncode == 0, (f"no git tag v{version}: create it on the release commit "
                                        f"(git tag -a v{version} <commit>)")
        pyproject = git("show", f"{commit.stdout.strip()}:pyproject.toml").stdout
        assert tomllib.loads(pyproject)["project"]["version"] == version
        assert git("merge-base", "--is-ancestor", commit.stdout.strip(), "HEAD").returncode == 0
