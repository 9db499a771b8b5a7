"""Production settings of the workloads (security, availability, image) and a static check of the Dockerfile."""

from __future__ import annotations

import re
import tomllib

import pytest
from checks import check_pods_locked_down
from manifest_build import KUSTOMIZATIONS, REPO, build, containers, find, pod_specs

IMAGE = "ghcr.io/preemptguard/preemptguard"


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_every_pod_is_locked_down(kustomization: str) -> None:
    """Pod Security "restricted" plus a read-only root filesystem, for every workload of every overlay."""
    objects = build(kustomization)
    assert find(objects, "Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    check_pods_locked_down(objects)


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_every_container_runs_the_released_image(kustomization: str) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    for key, spec in pod_specs(build(kustomization)).items():
        for container in containers(spec):
            assert container["image"] == f"{IMAGE}:{version}", key


def test_deployment_availability() -> None:
    objects = build("base")
    deployment = find(objects, "Deployment", "preemptguard")
    spec = deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    keys = {c["topologyKey"]: c for c in spec["topologySpreadConstraints"]}
    assert set(keys) == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    for constraint in keys.values():
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
    (term,) = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    pdb = find(objects, "PodDisruptionBudget", "preemptguard")
    # One replica at a time: with 3 replicas a drain moves one, waits for it to be ready, moves the next.
    assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    priority_class = find(objects, "PriorityClass", spec["priorityClassName"])
    # Above user workloads, below the system classes (2000000000), never the cluster default.
    assert 1_000_000 < priority_class["value"] <= 1_000_000_000 and not priority_class["globalDefault"]


def test_dockerfile_builds_from_the_debian_bases_and_runs_only_the_venv() -> None:
    text = (REPO / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    stages = [line for line in lines if line.upper().startswith("FROM ")]
    # Both bases are the local images release/build-image imports from debootstrap: nothing from a registry.
    assert stages == ["FROM ${BUILD_BASE} AS build", "FROM ${BASE}"]
    defaults = dict(line.removeprefix("ARG ").split("=", 1) for line in lines
                    if line.startswith("ARG ") and "=" in line)
    assert defaults["BUILD_BASE"].startswith("preemptguard-debian:") and defaults["BASE"].startswith(
        "preemptguard-debian:")
    build_stage, final = lines[lines.index(stages[0]):lines.index(stages[1])], lines[lines.index(stages[1]):]
    # Dependencies from the locks alone, before the sources are copied: a source change reuses that layer.
    copies = [line for line in build_stage if line.startswith("COPY ")]
    locks = next(i for i, line in enumerate(copies) if "release/requirements.lock" in line)
    sources = next(i for i, line in enumerate(copies) if "webhook" in line)
    assert locks < sources
    # The runtime stage runs nothing: Debian's python3 and the venv copied from the build stage.
    assert not [line for line in final if line.startswith("RUN ")]
    assert [line for line in final if line.startswith("COPY ")] == [
        "COPY --from=build /opt/preemptguard /opt/preemptguard"]
    users = [line.split(None, 1)[1] for line in final if line.upper().startswith("USER ")]
    assert users == ["65532:65532"]
    assert 'ENTRYPOINT ["preempt-guard"]' in final
    # `docker build .` sees the same files release/build-image puts in its context.
    patterns = [p.strip() for p in (REPO / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.strip().startswith("#")]
    assert patterns[0] == "*"
    for needed in ("pyproject.toml", "webhook/", "kubectl_plugin/", "examples/", "release/requirements.lock"):
        assert f"!{needed}" in patterns, needed


def test_makefile_targets() -> None:
    makefile = (REPO / "Makefile").read_text()
    for target in ("image", "push", "chart", "deploy", "undeploy", "manifests", "chart-docs"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), target
    assert re.search(r"\$\(KUBECTL\) kustomize manifests/overlays/", makefile)
    assert re.search(r"\$\(HELM\) upgrade --install \$\(RELEASE\) charts/preemptguard", makefile)
    assert re.search(r"^KUBECTL \?= kubectl$", makefile, re.MULTILINE)
    assert re.search(r"^HELM \?= helm$", makefile, re.MULTILINE)
    # The chart takes the image as values: no rendered manifest is rewritten with sed any more.
    assert "| sed" not in makefile
