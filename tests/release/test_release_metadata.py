"""Release hygiene: the package metadata and the changelog's Keep a Changelog shape."""

from __future__ import annotations

import re
import shutil
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


def release_commits() -> dict[str, str]:
    """release/tags: `v<version> <commit>` per line, comments and blank lines aside."""
    pairs = (line.split() for line in (REPO / "release" / "tags").read_text().splitlines())
    return {fields[0]: fields[1] for fields in pairs if fields and not fields[0].startswith("#")}


def dated_versions() -> list[str]:
    text = (REPO / "CHANGELOG.md").read_text()
    return re.findall(r"^## \[([^\]]+)\] - \d{4}-\d{2}-\d{2}$", text, re.MULTILINE)


def test_every_released_version_has_its_release_commit() -> None:
    """release/tags names, for each dated CHANGELOG section, an ancestor of HEAD whose pyproject.toml has it."""
    released, recorded = dated_versions(), release_commits()
    assert released
    assert sorted(recorded) == sorted(f"v{version}" for version in released)
    for version in released:
        commit = recorded[f"v{version}"]
        pyproject = git("show", f"{commit}:pyproject.toml")
        assert pyproject.returncode == 0, f"v{version}: {commit} is not a commit of this repository"
        assert tomllib.loads(pyproject.stdout)["project"]["version"] == version
        assert git("merge-base", "--is-ancestor", commit, "HEAD").returncode == 0


def test_an_existing_tag_is_on_its_release_commit() -> None:
    """Where this copy holds the tags (a clone of one branch may not), each is on the recorded commit."""
    for tag, commit in release_commits().items():
        found = git("rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}")
        assert found.returncode != 0 or found.stdout.strip() == commit, tag


def test_release_tag_creates_the_tags_and_never_moves_one(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    assert git("clone", "--quiet", "--no-tags", str(REPO), str(clone)).returncode == 0
    for name in ("tag", "tags"):  # this checkout's own, committed or not
        shutil.copy2(REPO / "release" / name, clone / "release" / name)
    run = lambda: subprocess.run([str(clone / "release" / "tag")], cwd=clone, capture_output=True,  # noqa: E731
                                 text=True, timeout=60, check=False)
    first = run()
    assert first.returncode == 0, first.stderr
    for tag, commit in release_commits().items():
        described = subprocess.run(["git", "cat-file", "-t", f"refs/tags/{tag}"], cwd=clone,
                                   capture_output=True, text=True, check=True).stdout.strip()
        assert described == "tag", f"{tag} is annotated"
        resolved = subprocess.run(["git", "rev-parse", f"refs/tags/{tag}^{{commit}}"], cwd=clone,
                                  capture_output=True, text=True, check=True).stdout.strip()
        assert resolved == commit
    assert run().returncode == 0, "a second run keeps the tags it made"
    tag, commit = next(iter(release_commits().items()))
    subprocess.run(["git", "tag", "-f", "-a", tag, f"{commit}^", "-m", "moved"], cwd=clone,
                   capture_output=True, check=True)
    moved = run()
    assert moved.returncode == 1 and f"{tag} is on" in moved.stderr and "not moved" in moved.stderr
