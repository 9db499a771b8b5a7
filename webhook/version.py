"""The installed PreemptGuard version, for ``--version`` of both commands."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "preemptguard"


def package_version() -> str:
    """The version pip installed; ``unknown`` when running from a source tree that was never installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"
