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
    assert pdb["spec"]["minAvailable"] == 2
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    priority_class = find(objects, "PriorityClass", spec["priorityClassName"])
    # Above user workloads, below the system classes (2000000000), never the cluster default.
    assert 1_000_000 < priority_class["value"] <= 1_000_000_000 and not priority_class["globalDefault"]


def test_dockerfile_is_multi_stage_non_root_and_installs_only_the_wheel() -> None:
    text = (REPO / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    stages = [line for line in lines if line.upper().startswith("FROM ")]
    assert len(stages) >= 3, "multi-stage build expected: dependencies, project wheel, runtime"
    assert all(re.search(r"python:3\.11[\w.-]*-slim", stage) for stage in stages)
    final = lines[lines.index(stages[-1]):]
    users = [line.split(None, 1)[1] for line in final if line.upper().startswith("USER ")]
    assert users and users[-1].split(":")[0] == "65532"
    final_text = "\n".join(final)
    # The wheels come from the build stages (bind-mounted); nothing is built here.
    assert re.search(r"from=deps\b.*wheels", final_text) and re.search(r"from=builder\b.*dist", final_text)
    assert not re.search(r"\b(gcc|build-essential|apt-get install)\b", final_text), "no build tools in the final image"
    assert re.search(r'ENTRYPOINT \["preempt-guard"\]', final_text)
    # Dependencies in their own layer, before (and so cached apart from) the project's wheel.
    runs = [line for line in final if line.startswith("RUN ")]
    deps_layer = next(i for i, line in enumerate(runs) if "from=deps" in line)
    project_layer = next(i for i, line in enumerate(runs) if "from=builder" in line)
    assert deps_layer < project_layer
    deps_stage = lines[lines.index(stages[0]):lines.index(stages[1])]
    copied = [line for line in deps_stage if line.startswith("COPY ")]
    assert copied == ["COPY pyproject.toml ./"], "the dependency stage must not see the sources"
    # An allow-list context: everything is ignored except the package sources and pyproject.toml.
    lines = (REPO / ".dockerignore").read_text().splitlines()
    patterns = [p.strip() for p in lines if p.strip() and not p.strip().startswith("#")]
    assert patterns[0] == "*"
    assert {p for p in patterns if p.startswith("!")} <= {"!pyproject.toml", "!README.md", "!LICENSE", "!webhook/",
                                                          "!kubectl_plugin/"}


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
