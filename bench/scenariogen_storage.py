"""The ``volumes`` and ``dra`` feature families of ``bench/scenariogen.py`` (issue #27), each drawn from its own
random stream on top of a scenario.

``volumes``: StorageClasses (WaitForFirstConsumer with a provisioner and ``allowedTopologies``, one without a
provisioner for static volumes only, an Immediate one); running pods on bound zonal PersistentVolumes of one CSI
driver, some ReadWriteOncePod; CSINodes whose attach limit is near full; and the incoming pod's volumes: a bound
zonal claim (sometimes in a zone without nodes), an unbound WaitForFirstConsumer claim (provisioned, or with or
without static volumes that fit), an unbound Immediate claim, a missing claim, an ``ephemeral:`` volume, a
ReadWriteOncePod claim held by a running pod (preemption's victim must be the holder), a bound claim on a node out
of attachments.

``dra``: DeviceClasses (one with a CEL selector on a capacity, one backing the extended resource
``example.com/accel``), ResourceSlices published per node as a driver does, claims allocated to and reserved for
running pods (by name or made from a template: the pod's ``resourceClaimStatuses``), and the incoming pod's
devices: a claim of its own, a template, a claim shared with a running pod, the extended resource, two claims.
No pod names a ResourceClaim that does not exist: upstream's PreEnqueue keeps such a pod out of the queue, so the
scheduler never decides (a verify Error, not a comparison).

Objects are valid for kube-apiserver (``verify`` stores them into etcd as they are, status included).
"""

from __future__ import annotations

import random
from typing import Any

ZONE_KEY = "topology.kubernetes.io/zone"
CSI_DRIVER = "pd.csi.example.com"
NOWHERE = "zone-d"  # a zone no node of the generator is in
GPU_DRIVER = "gpu.example.com"
TENANTS = ("team-a", "team-b", "batch")  # scenariogen's NAMESPACES: the incoming pod may move to a holder's
LOW_PRIORITY = 1000  # scenariogen's "mid" class: below every class of most incoming pods
ACCEL = "example.com/accel"  # an extended resource only a DeviceClass provides (DRAExtendedResource, GA in 1.37)


def _running(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "Pod" and o["spec"].get("nodeName")
            and not o["metadata"].get("deletionTimestamp") and o["status"].get("phase") == "Running"]


def _spec_of(pod: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = pod["spec"]["template"]["spec"] if pod["kind"] == "Deployment" else pod["spec"]
    return spec


def _uid(pod: dict[str, Any]) -> str:
    """An explicit UID for a pod a claim or volume names (the claim's owner, ``reservedFor``)."""
    meta = pod["metadata"]
    return str(meta.setdefault("uid", f"uid-{meta['namespace']}-{meta['name']}"))


def _zone_affinity(zone: str) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": ZONE_KEY, "operator": "In", "values": [zone]}]}]}}


def _storage_classes(rng: random.Random) -> list[dict[str, Any]]:
    zonal: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "zonal"},
                             "provisioner": CSI_DRIVER, "volumeBindingMode": "WaitForFirstConsumer",
                             "reclaimPolicy": "Delete"}
    if rng.random() < 0.6:
        zones = sorted(rng.sample(["zone-a", "zone-b", "zone-c", NOWHERE], rng.choice([1, 2])))
        zonal["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE_KEY, "values": zones}]}]
    return [zonal,
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
             "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
             "reclaimPolicy": "Retain"},
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "standard"},
             "provisioner": CSI_DRIVER, "volumeBindingMode": "Immediate", "reclaimPolicy": "Delete"}]


def _claim(name: str, namespace: str, storage_class: str, size: str, mode: str = "ReadWriteOnce") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-pvc-{namespace}-{name}"},
            "spec": {"accessModes": [mode], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}},
            "status": {"phase": "Pending"}}


def _bound_pair(rng: random.Random, name: str, namespace: str, zone: str, mode: str = "ReadWriteOnce",
                ) -> list[dict[str, Any]]:
    """A PersistentVolume of the CSI driver pinned to ``zone`` and the claim bound to it, with their status."""
    pv_name = f"pv-{namespace}-{name}"
    claim = _claim(name, namespace, "zonal", "10Gi", mode)
    claim["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    claim["spec"]["volumeName"] = pv_name
    claim["status"] = {"phase": "Bound", "accessModes": [mode], "capacity": {"storage": "10Gi"}}
    pv: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": [mode], "storageClassName": "zonal",
                 "persistentVolumeReclaimPolicy": "Delete", "csi": {"driver": CSI_DRIVER, "volumeHandle": pv_name},
                 "claimRef": {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": name,
                              "uid": claim["metadata"]["uid"]}},
        "status": {"phase": "Bound"}}
    roll = rng.random()  # VolumeBinding reads the node affinity, VolumeZone the labels; a real PV has one or both
    if roll < 0.7:
        pv["spec"]["nodeAffinity"] = _zone_affinity(zone)
    if roll > 0.4:
        pv["metadata"]["labels"] = {ZONE_KEY: zone}
    return [pv, claim]


def _mount(spec: dict[str, Any], volume: dict[str, Any]) -> None:
    spec.setdefault("volumes", []).append(volume)


def _claim_volume(name: str, claim: str) -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim}}


def volumes(rng: random.Random, objects: list[dict[str, Any]], incoming: dict[str, Any]) -> None:
    """Add the ``volumes`` family to a scenario (in place)."""
    nodes = [o for o in objects if o["kind"] == "Node"]
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE_KEY, "zone-a") for n in nodes}
    running = _running(objects)
    extra: list[dict[str, Any]] = _storage_classes(rng)
    attached: dict[str, int] = {name: 0 for name in zone_of}
    holders: list[tuple[dict[str, Any], str]] = []  # (pod, its ReadWriteOncePod claim)
    for i, pod in enumerate(running):
        if rng.random() >= 0.3:
            continue
        node, namespace = pod["spec"]["nodeName"], pod["metadata"]["namespace"]
        mode = "ReadWriteOncePod" if rng.random() < 0.3 else "ReadWriteOnce"
        name = f"data-{i}"
        extra += _bound_pair(rng, name, namespace, zone_of.get(node, "zone-a"), mode)
        _mount(pod["spec"], _claim_volume("data", name))
        attached[node] = attached.get(node, 0) + 1
        if mode == "ReadWriteOncePod":
            holders.append((pod, name))
    spec, namespace = _spec_of(incoming), incoming["metadata"]["namespace"]
    if spec.get("priorityClassName") in (None, "low", "mid", "gold") and rng.random() < 0.6:
        spec["priorityClassName"] = "top"  # a pod that can preempt nearly every running pod: volumes decide where
    case = _weighted(rng, (("bound", 22), ("provisioned", 14), ("static", 16), ("immediate", 5), ("missing", 4),
                           ("ephemeral", 10), ("held", 15), ("attach-limit", 14), ("none", 25)))
    zone = rng.choice(sorted(set(zone_of.values())))
    if case in ("bound", "attach-limit"):
        zone = NOWHERE if case == "bound" and rng.random() < 0.15 else zone
        extra += _bound_pair(rng, "new-data", namespace, zone)
        _mount(spec, _claim_volume("data", "new-data"))
    elif case in ("provisioned", "static", "immediate"):
        storage_class = {"provisioned": "zonal", "static": "local", "immediate": "standard"}[case]
        size = rng.choice(["2Gi", "5Gi"])
        extra.append(_claim("new-data", namespace, storage_class, size))
        _mount(spec, _claim_volume("data", "new-data"))
        if case == "static":
            extra += _static_volumes(rng, nodes)
    elif case == "missing":
        _mount(spec, _claim_volume("data", "never-created"))
    elif case == "ephemeral":
        storage_class = rng.choice(["zonal", "local"])
        _mount(spec, {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}}}}}})
        if storage_class == "local":
            extra += _static_volumes(rng, nodes)
    elif case == "held":
        # The holder runs in a tenant's namespace at a low priority, so that preemption can free its claim.
        holders = [(pod, name) for pod, name in holders if pod["metadata"]["namespace"] in TENANTS
                   and pod["spec"].get("priority", 0) <= LOW_PRIORITY]
        cheap = [p for p in running if p["metadata"]["namespace"] in TENANTS
                 and p["spec"].get("priority", 0) <= LOW_PRIORITY and not p["spec"].get("volumes")]
        if not holders and cheap:  # make one: the holder is one of the running pods
            pod = rng.choice(cheap)
            node = pod["spec"]["nodeName"]
            name = "exclusive"
            extra += _bound_pair(rng, name, pod["metadata"]["namespace"], zone_of.get(node, "zone-a"),
                                 "ReadWriteOncePod")
            _mount(pod["spec"], _claim_volume("data", name))
            attached[node] = attached.get(node, 0) + 1
            holders.append((pod, name))
        if holders:
            holder, name = rng.choice(holders)
            incoming["metadata"]["namespace"] = holder["metadata"]["namespace"]
            _mount(spec, _claim_volume("data", name))
    if rng.random() < 0.15 and spec.get("volumes"):  # a second, bound volume
        extra += _bound_pair(rng, "logs", incoming["metadata"]["namespace"],
                             zone if rng.random() < 0.8 else rng.choice(sorted(set(zone_of.values()))))
        _mount(spec, _claim_volume("logs", "logs"))
    if case == "attach-limit" or rng.random() < 0.4:  # attach limits from CSINodes, near full
        for node in nodes:
            name = node["metadata"]["name"]
            if rng.random() < 0.15:
                continue  # a node without a CSINode: no limit known
            driver: dict[str, Any] = {"name": CSI_DRIVER, "nodeID": name, "topologyKeys": [ZONE_KEY]}
            if rng.random() < 0.9:
                driver["allocatable"] = {"count": max(1, attached.get(name, 0) + rng.choice([0, 0, 1, 2]))}
            extra.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
                          "spec": {"drivers": [driver]}})
    objects.extend(extra)


def _static_volumes(rng: random.Random, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Available volumes of the ``local`` class, pinned to a node or a zone; some too small for the claim."""
    volumes = []
    for i in range(rng.choice([0, 1, 2, 3, 3])):
        node = rng.choice(nodes)
        if rng.random() < 0.5:
            term = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node["metadata"]["name"]]}
        else:
            term = {"key": ZONE_KEY, "operator": "In",
                    "values": [node["metadata"]["labels"].get(ZONE_KEY, "zone-a") if rng.random() < 0.8 else NOWHERE]}
        size = rng.choice(["1Gi", "5Gi", "10Gi"])
        volumes.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"local-pv-{i}"},
                        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                                 "storageClassName": "local", "persistentVolumeReclaimPolicy": "Retain",
                                 "local": {"path": f"/mnt/disks/vol{i}"},
                                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [term]}]}}},
                        "status": {"phase": "Available"}})
    return volumes


def _weighted(rng: random.Random, table: tuple[tuple[Any, int], ...]) -> Any:
    return rng.choices([item for item, _ in table], weights=[weight for _, weight in table])[0]


# ---- devices ------------------------------------------------------------------------------------------------------

MODELS = ("a100", "t4")
MEMORY = ("16Gi", "40Gi", "80Gi")
# CEL of the subset the allocator runs (webhook/cluster/cel.py): attributes, capacities with quantity().
SELECTORS = (f'device.attributes["{GPU_DRIVER}"].model == "a100"',
             f'device.capacity["{GPU_DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0')


def _device_classes(rng: random.Random) -> list[dict[str, Any]]:
    driver = {"cel": {"expression": f'device.driver == "{GPU_DRIVER}"'}}
    classes = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                "spec": {"selectors": [driver]}},
               {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "big-gpu"},
                "spec": {"selectors": [driver, {"cel": {"expression": SELECTORS[1]}}]}}]
    if rng.random() < 0.5:
        classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "accel"},
                        "spec": {"selectors": [driver], "extendedResourceName": ACCEL}})
    return classes


def _requests(rng: random.Random) -> list[dict[str, Any]]:
    exactly: dict[str, Any] = {"deviceClassName": rng.choice(["gpu", "gpu", "big-gpu"]),
                               "allocationMode": "ExactCount", "count": rng.choice([1, 1, 1, 2])}
    if rng.random() < 0.3:
        exactly["selectors"] = [{"cel": {"expression": SELECTORS[0]}}]
    return [{"name": "gpu", "exactly": exactly}]


def _resource_claim(name: str, namespace: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-claim-{namespace}-{name}"},
            "spec": {"devices": {"requests": requests}}}


def _template(namespace: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu-template", "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": requests}}}}


def _allocate(claim: dict[str, Any], node: str, devices: list[str], holder: dict[str, Any]) -> None:
    claim["status"] = {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": GPU_DRIVER, "pool": node, "device": d}
                                               for d in devices]},
                       "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                           {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
        "reservedFor": [{"resource": "pods", "name": holder["metadata"]["name"], "uid": _uid(holder)}]}


def devices(rng: random.Random, objects: list[dict[str, Any]], incoming: dict[str, Any]) -> None:
    """Add the ``dra`` family to a scenario (in place)."""
    nodes = [o for o in objects if o["kind"] == "Node"]
    extra: list[dict[str, Any]] = _device_classes(rng)
    accel = any(c["spec"].get("extendedResourceName") for c in extra)
    free: dict[str, list[str]] = {}
    for node in nodes:
        if rng.random() >= 0.7 and free:
            continue
        name = node["metadata"]["name"]
        count = rng.choice([1, 2, 4, 4])
        model, memory = rng.choice(MODELS), rng.choice(MEMORY)
        extra.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                      "metadata": {"name": f"{name}-{GPU_DRIVER}"},
                      "spec": {"driver": GPU_DRIVER, "nodeName": name,
                               "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                               "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": model}},
                                            "capacity": {"memory": {"value": memory}}} for i in range(count)]}})
        free[name] = [f"gpu-{i}" for i in range(count)]
    templated: set[str] = set()
    shared: list[dict[str, Any]] = []  # claims held by running pods, by name
    for pod in _running(objects):
        node = pod["spec"]["nodeName"]
        if not free.get(node) or rng.random() >= 0.3:
            continue
        namespace, pod_name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        take = free[node][:rng.choice([1, 1, 2])]
        free[node] = free[node][len(take):]
        if rng.random() < 0.35:  # made by the resourceclaim controller from a template
            claim = _resource_claim(f"{pod_name}-gpu-x7k2p", namespace, [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": len(take)}}])
            claim["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
            claim["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": pod_name,
                                                     "uid": _uid(pod), "controller": True,
                                                     "blockOwnerDeletion": True}]
            pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
            pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]
            if namespace not in templated:
                templated.add(namespace)
                extra.append(_template(namespace, _requests(rng)))
        else:
            claim = _resource_claim(f"{pod_name}-gpu", namespace, [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": len(take)}}])
            pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]
            shared.append(claim)
        _allocate(claim, node, take, pod)
        extra.append(claim)
    spec, namespace = _spec_of(incoming), incoming["metadata"]["namespace"]
    # Fewer devices for a pod that already has volumes: together they leave few pods that preemption can help.
    case = _weighted(rng, (("claim", 35), ("template", 25), ("shared", 10), ("extended", 15), ("two", 10),
                           ("none", 150 if spec.get("volumes") else 45)))
    if case == "extended" and not accel:
        case = "claim"
    if case == "shared":
        mine = [c for c in shared if c["metadata"]["namespace"] == namespace]
        if mine:
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": rng.choice(mine)["metadata"]["name"]}]
        else:
            case = "claim"
    if case in ("claim", "two"):
        extra.append(_resource_claim("new-gpu", namespace, _requests(rng)))
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "new-gpu"}]
    if case in ("template", "two"):
        if namespace not in templated:
            templated.add(namespace)
            extra.append(_template(namespace, _requests(rng)))
        spec.setdefault("resourceClaims", []).append(
            {"name": "gpu" if case == "template" else "more", "resourceClaimTemplateName": "gpu-template"})
    if case == "extended":
        count = rng.choice(["1", "1", "2"])
        container = spec["containers"][0]
        resources = container.setdefault("resources", {})
        resources.setdefault("requests", {})[ACCEL] = count
        resources.setdefault("limits", {})[ACCEL] = count
    objects.extend(extra)


def features(objects: list[dict[str, Any]], spec: dict[str, Any]) -> dict[str, bool]:
    """The storage and device features one scenario exercises (``scenariogen.features``)."""
    kinds = {o["kind"] for o in objects}
    incoming_claims = [v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes") or []
                       if "persistentVolumeClaim" in v]
    claims = [o for o in objects if o["kind"] == "PersistentVolumeClaim"
              and o["metadata"]["name"] in incoming_claims]
    existing = [o for o in objects if o["kind"] == "Pod"]
    pod_claims = spec.get("resourceClaims") or []
    return {
        "bound zonal volumes (incoming)": any(c["spec"].get("volumeName") for c in claims),
        "volume in a zone without nodes": any(o["kind"] == "PersistentVolume" and NOWHERE in str(o["spec"].get(
            "nodeAffinity")) and o["spec"].get("claimRef", {}).get("name") in incoming_claims for o in objects),
        "WaitForFirstConsumer claim, provisioned": any(c["spec"]["storageClassName"] == "zonal"
                                                       and not c["spec"].get("volumeName") for c in claims),
        "WaitForFirstConsumer claim, static volumes": any(c["spec"]["storageClassName"] == "local" for c in claims),
        "unbound Immediate claim": any(c["spec"]["storageClassName"] == "standard" for c in claims),
        "missing claim": "never-created" in incoming_claims,
        "ephemeral volume": any("ephemeral" in v for v in spec.get("volumes") or []),
        "ReadWriteOncePod claim held by a running pod": any(
            "ReadWriteOncePod" in c["spec"]["accessModes"] for c in claims),
        "CSI attach limits (CSINode)": "CSINode" in kinds,
        "running pods with volumes": any(p["spec"].get("volumes") for p in existing),
        "devices: a claim of its own": any(c.get("resourceClaimName") == "new-gpu" for c in pod_claims),
        "devices: a claim template": any(c.get("resourceClaimTemplateName") for c in pod_claims),
        "devices: a claim shared with a running pod": any(c.get("resourceClaimName") not in (None, "new-gpu")
                                                          for c in pod_claims),
        "devices: DRA extended resource": ACCEL in str(spec.get("containers")),
        "devices held by running pods": any(p["spec"].get("resourceClaims") for p in existing),
        "device selectors (CEL)": "selectors" in str(pod_claims) or any(
            o["kind"] == "ResourceClaimTemplate" and "selectors" in str(o["spec"]) for o in objects),
    }
