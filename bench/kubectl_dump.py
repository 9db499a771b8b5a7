"""A generated cluster (bench/clustergen.py) written as ``kubectl get ... -A -o json`` (or ``-o yaml``) prints it.

The API server returns every object with its defaults and status filled in: ``kubectl_object`` adds the usual
ones (owner references, resource versions, uids, default tolerations, pod IPs and QoS class; node addresses,
conditions, images and node info), deterministically, so the file has the size and shape of a dump: 5,000 nodes
and 150,000 pods make about 560 MB (issue 19's dump of the same cluster was 537 MB). kubectl prints unstructured
Lists with sorted keys and a four-space indent (``json.MarshalIndent``). Objects are written one at a time, so
the file never exists as one string.

    .venv/bin/python bench/kubectl_dump.py --nodes 5000 --out /tmp/cluster-5000.json [--yaml]

An ``--out`` ending in ``.gz`` is gzip-compressed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clustergen import EPOCH, _rfc3339, generate_cluster


def _uid(name: str) -> str:
    digest = hashlib.sha1(name.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _pod(raw: dict[str, Any]) -> dict[str, Any]:
    meta, spec, status = raw["metadata"], raw["spec"], raw["status"]
    name = meta["name"]
    replica_set = f"{meta['labels']['app']}-7c9f8d6b5"
    started = status["startTime"]
    container = spec["containers"][0]
    requests = container["resources"]["requests"]
    container.update({
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": requests, "limits": {"memory": requests["memory"]}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    })
    meta.update({
        "creationTimestamp": started, "generateName": f"{replica_set}-",
        "labels": {**meta["labels"], "pod-template-hash": "7c9f8d6b5"},
        "ownerReferences": [{"apiVersion": "apps/v1", "blockOwnerDeletion": True, "controller": True,
                             "kind": "ReplicaSet", "name": replica_set, "uid": _uid(replica_set)}],
        "resourceVersion": str(10_000_000 + int(_uid(name)[:6], 16)), "uid": _uid(name),
    })
    spec.update({
        "automountServiceAccountToken": False, "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler", "securityContext": {}, "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": spec.get("terminationGracePeriodSeconds", 30),
        "tolerations": [{"effect": "NoExecute", "key": f"node.kubernetes.io/{taint}", "operator": "Exists",
                         "tolerationSeconds": 300} for taint in ("not-ready", "unreachable")],
    })
    digest = hashlib.sha1(name.encode()).digest()
    pod_ip = f"10.{digest[0]}.{digest[1]}.{digest[2]}"
    status.update({
        "hostIP": "10.0.0.1", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "qosClass": "Burstable",
    })
    return raw


def _node(raw: dict[str, Any]) -> dict[str, Any]:
    meta, status = raw["metadata"], raw["status"]
    name = meta["name"]
    when = _rfc3339(EPOCH)
    meta.update({
        "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                        "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        "creationTimestamp": when, "resourceVersion": str(20_000_000 + int(_uid(name)[:6], 16)), "uid": _uid(name),
        "labels": {**meta["labels"], "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                   "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                   "node.kubernetes.io/instance-type": "n2-standard-16"},
    })
    raw["spec"].update({"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"],
                        "providerID": f"gce://bench/zone/{name}"})
    status.update({
        "addresses": [{"address": "10.0.0.1", "type": "InternalIP"}, {"address": name, "type": "Hostname"}],
        "conditions": [{"lastHeartbeatTime": when, "lastTransitionTime": when, "message": f"kubelet has {kind}",
                        "reason": f"Kubelet{kind}", "status": "False" if kind != "Ready" else "True", "type": kind}
                       for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "images": [{"names": [f"registry.example/image-{i}@sha256:{'1' * 64}", f"registry.example/image-{i}:v1"],
                    "sizeBytes": 10_000_000 + i} for i in range(20)],
        "nodeInfo": {"architecture": "amd64", "bootID": _uid(name + "boot"), "containerRuntimeVersion": "containerd://1.7",
                     "kernelVersion": "6.1.0", "kubeProxyVersion": "v1.31.0", "kubeletVersion": "v1.31.0",
                     "machineID": _uid(name)[:32], "operatingSystem": "linux", "osImage": "Ubuntu 24.04",
                     "systemUUID": _uid(name + "system")},
    })
    return raw


def kubectl_object(raw: dict[str, Any]) -> dict[str, Any]:
    """The generated object with the fields the API server adds (pods and nodes; others as generated)."""
    kind = raw.get("kind")
    if kind == "Pod":
        return _pod(raw)
    if kind == "Node":
        return _node(raw)
    return raw


def kubectl_objects(nodes: int, pods_per_node: int = 30, *, seed: int | None = None) -> Iterator[dict[str, Any]]:
    """The cluster of ``generate_cluster(nodes, pods_per_node, seed=nodes)``, object by object, as kubectl prints it."""
    objects = generate_cluster(nodes, pods_per_node, seed=nodes if seed is None else seed)
    objects.reverse()
    while objects:  # popped, so each object is freed once written
        yield kubectl_object(objects.pop())


def write_json(out: IO[str], objects: Iterator[dict[str, Any]]) -> None:
    """``kubectl get -o json``: a List, sorted keys, four-space indent."""
    out.write('{\n    "apiVersion": "v1",\n    "items": [')
    for i, obj in enumerate(objects):
        text = json.dumps(obj, indent=4, sort_keys=True)
        out.write(("," if i else "") + "\n        " + text.replace("\n", "\n        "))
    out.write('\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n')


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """No anchors or aliases: kubectl writes every value out."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def write_yaml(out: IO[str], objects: Iterator[dict[str, Any]]) -> None:
    """``kubectl get -o yaml``: a List, items as a block sequence."""
    out.write("apiVersion: v1\nitems:\n")
    for obj in objects:
        text = yaml.dump(obj, Dumper=_Dumper, sort_keys=True, default_flow_style=False)
        out.write("- " + text.rstrip("\n").replace("\n", "\n  ") + "\n")
    out.write("kind: List\nmetadata:\n  resourceVersion: \"\"\n")


def write_dump(path: Path, nodes: int, pods_per_node: int = 30, *, as_yaml: bool = False) -> Path:
    """Write the dump to ``path`` (gzip-compressed when it ends in ``.gz``) and return it."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as out:  # type: ignore[operator]
        (write_yaml if as_yaml else write_json)(out, kubectl_objects(nodes, pods_per_node))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--yaml", action="store_true", help="kubectl get -o yaml instead of -o json")
    parser.add_argument("--out", type=Path, required=True, help="the file to write (.gz: gzip-compressed)")
    args = parser.parse_args()
    path = write_dump(args.out, args.nodes, args.pods_per_node, as_yaml=args.yaml)
    print(f"{path}: {path.stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
