"""The Kubernetes releases whose preemption PreemptGuard predicts, and what differs between them.

Each supported minor release is one row of ``RELEASES``: the behaviours the predictor models that changed
between v1.33 and v1.37 (docs/preemption.md §12 names the upstream source of each). The predictor reads the
behaviours, never the version number, so a new release is a new row (``scheduler.kubernetesVersion`` in
``--config``, ``--kube-version`` on the plugin and ``verify``). Pure data: the domain's, beside the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from webhook.errors import ConfigError

VERSION = re.compile(r"^v?1\.(\d+)(?:\.(\d+))?$")


@dataclass(frozen=True, slots=True)
class KubernetesRelease:
    """One minor release's preemption semantics (docs/preemption.md §12)."""

    minor: int
    # A victim's PDB budget: decrement only up to the first PDB that goes below zero (v1.37
    # FilterVictimsWithPDBViolation), or every PDB that selects it (v1.33-v1.36 filterPodsWithPDBViolation).
    pdb_stop_at_first_violation: bool
    # A pod with scheduling gates reserves room on its nominated node (v1.37 queue addPod records every added
    # pod's nomination); before, only a pod that entered the active queue did, never a gated one.
    gated_nominations_reserve: bool
    # Pod-level requests (spec.resources) count (PodLevelResources beta, on, from v1.34); in v1.33 the API server
    # drops them on create and the scheduler sums the containers.
    pod_level_resources: bool

    @property
    def name(self) -> str:
        return f"v1.{self.minor}"


RELEASES: dict[int, KubernetesRelease] = {
    33: KubernetesRelease(33, pdb_stop_at_first_violation=False, gated_nominations_reserve=False,
                          pod_level_resources=False),
    34: KubernetesRelease(34, pdb_stop_at_first_violation=False, gated_nominations_reserve=False,
                          pod_level_resources=True),
    35: KubernetesRelease(35, pdb_stop_at_first_violation=False, gated_nominations_reserve=False,
                          pod_level_resources=True),
    36: KubernetesRelease(36, pdb_stop_at_first_violation=False, gated_nominations_reserve=False,
                          pod_level_resources=True),
    37: KubernetesRelease(37, pdb_stop_at_first_violation=True, gated_nominations_reserve=True,
                          pod_level_resources=True),
}
DEFAULT_RELEASE = RELEASES[37]
SUPPORTED = f"v1.{min(RELEASES)} .. v1.{max(RELEASES)}"


def parse_release(text: str) -> KubernetesRelease:
    """``v1.34``, ``1.34`` or ``v1.34.4`` (any patch release of the minor): its row; ``ConfigError`` otherwise."""
    match = VERSION.match(text.strip())
    if match is None:
        raise ConfigError(f"{text!r} is not a Kubernetes version (write it as v1.34 or v1.34.4)")
    release = RELEASES.get(int(match.group(1)))
    if release is None:
        raise ConfigError(f"Kubernetes {text} is not a release PreemptGuard predicts for (supported: {SUPPORTED})")
    return release


def closest_release(text: str) -> tuple[KubernetesRelease, str]:
    """The row for a version a binary reports, or the nearest supported one and a note saying so."""
    match = VERSION.match(text.strip())
    if match is None:
        return DEFAULT_RELEASE, (f"the release of the binaries ({text}) is unknown: predicting as "
                                 f"{DEFAULT_RELEASE.name}")
    minor = int(match.group(1))
    if minor in RELEASES:
        return RELEASES[minor], ""
    nearest = RELEASES[min(RELEASES, key=lambda m: abs(m - minor))]
    return nearest, f"Kubernetes {text} is not a release PreemptGuard knows (supported: {SUPPORTED}): " \
                    f"predicting as {nearest.name}"
