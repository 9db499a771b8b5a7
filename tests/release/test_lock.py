"""release/requirements.lock and release/build-requirements.lock: what the image installs with
``pip install --require-hashes``. Every requirement of pyproject.toml is pinned within its range, and every pin
carries the sha256 of its files (release/lock rewrites them)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)(?:\s*;\s*([^\\]+?))?\s*\\?$")


def pins(lock: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256 hashes), read as pip reads a hash-checking requirements file."""
    found: dict[str, tuple[str, list[str]]] = {}
    current = ""
    for line in lock.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = PIN.match(stripped)
        if match:
            current = canonicalize_name(match[1])
            assert current not in found, f"{lock.name}: {current} pinned twice"
            found[current] = (match[2], [])
        elif stripped.startswith("--hash=sha256:"):
            digest = stripped.removeprefix("--hash=sha256:").rstrip(" \\")
            assert re.fullmatch(r"[0-9a-f]{64}", digest), stripped
            found[current][1].append(digest)
        else:
            raise AssertionError(f"{lock.name}: not a pin or a hash: {line!r}")
    return found


def pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


@pytest.mark.parametrize(("lock", "section"), [("requirements.lock", "runtime"), ("build-requirements.lock", "build")])
def test_every_requirement_is_pinned_in_range_with_hashes(lock: str, section: str) -> None:
    data = pyproject()
    requirements = (data["project"]["dependencies"] if section == "runtime"  # type: ignore[index]
                    else data["build-system"]["requires"])  # type: ignore[index]
    locked = pins(REPO / "release" / lock)
    assert locked, lock
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{lock}: {name} is not pinned (run release/lock)"
        version = locked[name][0]
        assert requirement.specifier.contains(version, prereleases=True), f"{lock}: {name}=={version} {requirement}"
    for name, (version, hashes) in locked.items():
        assert hashes, f"{lock}: {name}=={version} has no --hash (pip --require-hashes refuses it)"


def test_the_dockerfile_installs_from_the_locks_with_hashes_required() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    for lock in ("release/requirements.lock", "release/build-requirements.lock"):
        assert re.search(rf"pip install [^\n]*--require-hashes[^\n]*-r {re.escape(lock)}", dockerfile), lock
    # pip's CA bundle reaches the build stage only.
    build_stage, runtime_stage = dockerfile.split("\nFROM ${BASE}")
    assert "pip-ca.crt" in build_stage and "pip-ca.crt" not in runtime_stage
    assert "\nUSER 65532:65532" in runtime_stage


def test_the_pin_reader_refuses_an_unhashed_pin(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("aiohttp==3.9.0\n")
    assert pins(lock) == {"aiohttp": ("3.9.0", [])}
    lock.write_text("aiohttp>=3.9\n")
    with pytest.raises(AssertionError, match="not a pin"):
        pins(lock)
