"""The control plane's etcd, written directly: a snapshot restored as it was stored, past admission and validation.

A snapshot is stored state: pods whose priority no longer matches today's classes (created before a
``globalDefault`` class existed), several ``globalDefault`` classes, pods of a RuntimeClass that has since
changed or is gone, objects a newer validation would refuse. Creating them again through the API server runs
the admission plugins that would rewrite or refuse them (Priority, RuntimeClass, LimitRanger, ...), as a
restore from an etcd backup does not. So ``verify`` writes the snapshot's objects into etcd under the keys
kube-apiserver reads (``/registry/<resource>/[<namespace>/]<name>``, JSON in the storage version, which its
storage decoder accepts beside protobuf: k8s.io/apiserver/pkg/server/storage/storage_codec.go), and the API
server's watch cache and every informer (the scheduler's, the admission plugins') see them as they were. The
pods under test then go through the API server with every admission plugin on.

etcd's JSON gateway (``/v3/kv/*``, keys and values base64) is used over loopback HTTP, in transactions of at
most ``MAX_TXN_OPS`` writes (etcd's default ``--max-txn-ops`` is 128).
"""

from __future__ import annotations

import base64
import http.client
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.errors import PreemptGuardError

PREFIX = "/registry"
MAX_TXN_OPS = 100
# kind -> (storage apiVersion, resource as stored, namespaced). Nodes are "minions" in etcd:
# pkg/kubeapiserver/default_storage_factory_builder.go (SpecialDefaultResourcePrefixes).
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("v1", "namespaces", False),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses", False),
    "RuntimeClass": ("node.k8s.io/v1", "runtimeclasses", False),
    "Node": ("v1", "minions", False),
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets", True),
    "ResourceQuota": ("v1", "resourcequotas", True),
    "LimitRange": ("v1", "limitranges", True),
    "Pod": ("v1", "pods", True),
    # Only the owners verify creates for a workload's replicas (observe.py), removed with the scenario.
    "ReplicaSet": ("apps/v1", "replicasets", True),
    "StatefulSet": ("apps/v1", "statefulsets", True),
    # Storage and devices (#27): resource.k8s.io/v1 is served from v1.34; on an older release kube-apiserver cannot
    # read them back and they are dropped with a note (``store``).
    "PersistentVolume": ("v1", "persistentvolumes", False),
    "PersistentVolumeClaim": ("v1", "persistentvolumeclaims", True),
    "StorageClass": ("storage.k8s.io/v1", "storageclasses", False),
    "CSINode": ("storage.k8s.io/v1", "csinodes", False),
    "VolumeAttachment": ("storage.k8s.io/v1", "volumeattachments", False),
    "DeviceClass": ("resource.k8s.io/v1", "deviceclasses", False),
    "ResourceSlice": ("resource.k8s.io/v1", "resourceslices", False),
    "ResourceClaim": ("resource.k8s.io/v1", "resourceclaims", True),
    "ResourceClaimTemplate": ("resource.k8s.io/v1", "resourceclaimtemplates", True),
}
# Metadata kube-apiserver derives from the storage itself (resourceVersion from the etcd revision) or that only
# the write path keeps (managedFields); dropped before storing.
DERIVED_METADATA = ("resourceVersion", "selfLink", "managedFields")
UID_NAMESPACE = uuid.UUID("6f0b2c7e-6d2f-4b8e-9a55-2c0f3d1e7a10")


class StorageError(PreemptGuardError):
    """etcd refused or did not answer a request."""

    exit_code = 2


def storage_key(kind: str, name: str, namespace: str | None = None) -> str:
    _, resource, namespaced = RESOURCES[kind]
    return f"{PREFIX}/{resource}/{namespace or 'default'}/{name}" if namespaced else f"{PREFIX}/{resource}/{name}"


def prefix_of(kind: str) -> str:
    return f"{PREFIX}/{RESOURCES[kind][1]}/"


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return storage_key(str(obj["kind"]), str(meta["name"]), meta.get("namespace"))


def stable_uid(obj: Mapping[str, Any]) -> str:
    """A UID for an object that has none (generated scenarios): derived from kind, namespace and name, so the same
    object gets the same UID every time it is loaded (the predictor's last tie-break is the UID)."""
    meta = obj.get("metadata") or {}
    return str(uuid.uuid5(UID_NAMESPACE, f"{obj.get('kind')}/{meta.get('namespace') or ''}/{meta.get('name')}"))


def stored_form(obj: Mapping[str, Any], *, now: str) -> dict[str, Any]:
    """``obj`` as kube-apiserver keeps it: the storage ``apiVersion``, a UID and creation time (the snapshot's when
    it has them), no derived metadata. Everything else as the snapshot has it."""
    kind = str(obj["kind"])
    stored = dict(obj)
    stored["apiVersion"] = RESOURCES[kind][0]
    meta = dict(stored.get("metadata") or {})
    for name in DERIVED_METADATA:
        meta.pop(name, None)
    meta.setdefault("uid", stable_uid(obj))
    meta.setdefault("creationTimestamp", now)
    if RESOURCES[kind][2]:
        meta.setdefault("namespace", "default")
    stored["metadata"] = meta
    return stored


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _range_end(prefix: str) -> str:
    """The end of the key range holding every key that starts with ``prefix`` (etcd's ``WithPrefix``)."""
    raw = prefix.encode()
    return base64.b64encode(raw[:-1] + bytes([raw[-1] + 1])).decode()


@dataclass
class Etcd:
    """A small client of etcd's JSON gateway on loopback (one kept-alive connection)."""

    port: int
    timeout: float = 30.0
    _connection: http.client.HTTPConnection | None = None

    def call(self, method: str, body: Mapping[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        for attempt in (1, 2):
            if self._connection is None:
                self._connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                self._connection.request("POST", f"/v3/kv/{method}", body=data,
                                         headers={"Content-Type": "application/json"})
                response = self._connection.getresponse()
                payload, status = response.read(), response.status
                break
            except (http.client.HTTPException, OSError) as exc:
                self.close()
                if attempt == 2:
                    raise StorageError(f"etcd on 127.0.0.1:{self.port} did not answer /v3/kv/{method}: {exc}") from exc
        answer: dict[str, Any] = json.loads(payload) if payload else {}
        if status != 200:
            raise StorageError(f"etcd refused /v3/kv/{method}: {status} {answer.get('message') or answer}")
        return answer

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def put_all(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Store every (key, object) pair, ``MAX_TXN_OPS`` to a transaction."""
        ops: list[dict[str, Any]] = []
        for key, value in items:
            ops.append({"request_put": {"key": _b64(key), "value": _b64(json.dumps(value, separators=(",", ":")))}})
            if len(ops) == MAX_TXN_OPS:
                self.call("txn", {"success": ops})
                ops = []
        if ops:
            self.call("txn", {"success": ops})

    def delete_all(self, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), MAX_TXN_OPS):
            self.call("txn", {"success": [{"request_delete_range": {"key": _b64(k)}}
                                          for k in keys[start:start + MAX_TXN_OPS]]})

    def keys(self, prefix: str) -> list[str]:
        answer = self.call("range", {"key": _b64(prefix), "range_end": _range_end(prefix), "keys_only": True})
        return [base64.b64decode(kv["key"]).decode() for kv in answer.get("kvs") or []]
