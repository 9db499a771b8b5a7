"""What to preview: manifests from files or stdin (``-f``), or an existing workload named ``TYPE/NAME``.

Manifests become plain API objects (``Pod``, a workload with a pod template, or a ``List`` of them), checked
here so that a bad file fails before any cluster or webhook is contacted. Objects that are not workloads
(Services, ConfigMaps, RBAC, custom resources: what ``helm template`` or a manifests directory holds besides
them) are set aside by ``select_workloads`` for a note, or refused with ``strict``. ``pod_manifests`` turns an object
into the pods a dry-run create sends, named like the predictor names them (``workloads.expand_object``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from webhook.cluster.model import Node
from webhook.errors import InvalidInput
from webhook.preemption.workloads import WORKLOAD_KINDS, daemonset_pod_objects, pod_template, replica_name
from webhook.routes import PREDICTION_ANNOTATION

JsonObject = dict[str, Any]
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _ManifestLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """Safe YAML without timestamp resolution: an unquoted time stays a string, as in Kubernetes' YAML-to-JSON."""


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


# ---- -f FILE ----------------------------------------------------------------------------------------
def manifest_files(filename: str, *, recursive: bool = False) -> list[Path]:
    """``FILE``, or the manifests inside a directory: directly in it, or with ``recursive`` in it and every
    directory below (``-R``), in kubectl's order (``filepath.Walk``: lexical, a directory's files and
    subdirectories interleaved by name)."""
    path = Path(filename)
    if path.is_dir():
        files = _walk(path, recursive)
        if not files:
            raise InvalidInput(f"{filename}: no {'/'.join(MANIFEST_SUFFIXES)} files in this directory")
        return files
    if not path.exists():
        raise InvalidInput(f'the path "{filename}" does not exist')
    return [path]


def _walk(directory: Path, recursive: bool) -> list[Path]:
    found: list[Path] = []
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        if entry.is_dir():
            if recursive:
                found += _walk(entry, recursive)
        elif entry.is_file() and entry.suffix in MANIFEST_SUFFIXES:
            found.append(entry)
    return found


def read_text(filename: str, stdin: TextIO) -> str:
    try:
        return stdin.read() if filename == "-" else Path(filename).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{filename}: not UTF-8 text: {exc.reason}") from exc
    except OSError as exc:
        raise InvalidInput(f"{filename}: cannot read: {exc.strerror or exc}") from exc


def parse_manifests(text: str, source: str, *, strict: bool = False) -> list[JsonObject]:
    """The objects of a YAML or JSON stream, checked; errors name the source, line or document."""
    try:
        documents = list(yaml.load_all(text, Loader=_ManifestLoader))
    except yaml.YAMLError as exc:
        raise InvalidInput(yaml_error_message(exc, source)) from exc
    objects: list[JsonObject] = []
    for index, document in enumerate(documents, start=1):
        if document is None:
            continue
        where = f"{source}: document {index}" if len(documents) > 1 else source
        check_object(document, where, strict=strict)
        objects.append(document)
    return objects


def yaml_error_message(exc: yaml.YAMLError, source: str) -> str:
    """``FILE:LINE:COLUMN: invalid YAML: <problem>`` (1-based, like editors and compilers print it)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    if context and context_mark is not None and context_mark is not mark:
        context = f"{context} started at line {context_mark.line + 1}, column {context_mark.column + 1}"
    reason = f"{problem} ({context})" if context and problem != context else problem
    where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
    return f"{where}: invalid YAML: {reason}"


def read_manifests(filenames: Sequence[str], stdin: TextIO, *, recursive: bool = False,
                   strict: bool = False) -> list[JsonObject]:
    """Every object of every ``-f`` argument, in order; ``-`` is standard input. ``strict``: an object that is not
    a workload is an error naming it, instead of one ``select_workloads`` sets aside."""
    objects: list[JsonObject] = []
    for filename in filenames:
        if filename == "-":
            objects += parse_manifests(read_text("-", stdin), "<stdin>", strict=strict)
            continue
        for path in manifest_files(filename, recursive=recursive):
            objects += parse_manifests(read_text(str(path), stdin), str(path), strict=strict)
    if not objects:
        raise InvalidInput(f"no objects passed to preview (in {', '.join(filenames)})")
    return objects


def is_list(obj: Mapping[str, Any]) -> bool:
    kind = obj.get("kind")
    return kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in obj)


def flatten(objects: Iterable[JsonObject]) -> list[JsonObject]:
    """The objects with every ``List`` (nested too) replaced by its items."""
    flat: list[JsonObject] = []
    for obj in objects:
        flat += flatten(obj.get("items") or []) if is_list(obj) else [obj]
    return flat


def check_namespace_flag(objects: Iterable[JsonObject], namespace: str | None) -> None:
    """kubectl's rule for ``-n`` with ``-f``: an object that names another namespace is an error, never
    silently moved (``resource.Builder``'s "does not match the namespace")."""
    if not namespace:
        return
    for obj in flatten(objects):
        meta = obj.get("metadata")
        own = meta.get("namespace") if isinstance(meta, Mapping) else None
        if own and own != namespace:
            raise InvalidInput(f'the namespace from the provided object "{own}" does not match the namespace '
                               f'"{namespace}". You must pass \'--namespace={own}\' to perform this operation.')


def is_workload(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == "Pod" or obj.get("kind") in WORKLOAD_KINDS


def select_workloads(objects: Iterable[JsonObject]) -> tuple[list[JsonObject], list[JsonObject]]:
    """(the workloads to preview, the other objects), Lists flattened, each in order."""
    flat = flatten(objects)
    return [o for o in flat if is_workload(o)], [o for o in flat if not is_workload(o)]


def skipped_note(skipped: Sequence[JsonObject]) -> str | None:
    """One line for everything set aside: how many objects, and how many of each kind, in order of first sight;
    None when nothing was."""
    if not skipped:
        return None
    kinds: dict[str, int] = {}
    for obj in skipped:
        kinds[str(obj.get("kind"))] = kinds.get(str(obj.get("kind")), 0) + 1
    counted = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    noun = "object that is not a workload" if len(skipped) == 1 else "objects that are not workloads"
    return f"skipped {len(skipped)} {noun} ({counted}); --strict refuses them"


def check_object(obj: object, where: str, *, strict: bool = False) -> None:
    """A Pod, a workload with a pod template, or a List of them, checked; another kind is an error naming it
    with ``strict``, and set aside later (``select_workloads``) without."""
    if not isinstance(obj, Mapping):
        raise InvalidInput(f"{where}: expected a Kubernetes object, got {_type_name(obj)}")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InvalidInput(f"{where}: the object has no kind")
    if is_list(obj):
        items = obj.get("items") or []
        if not isinstance(items, list):
            raise InvalidInput(f"{where}: items must be a list")
        for i, item in enumerate(items):
            check_object(item, f"{where}, items[{i}]", strict=strict)
        return
    if kind != "Pod" and kind not in WORKLOAD_KINDS:
        if strict:
            raise InvalidInput(f"{where}: {kind} is not a workload (--strict): expected Pod, "
                               f"{', '.join(WORKLOAD_KINDS)} or a List of them")
        return
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping) or not (metadata.get("name") or metadata.get("generateName")):
        raise InvalidInput(f"{where}: {kind} has no metadata.name")
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, Mapping):
        raise InvalidInput(f"{where}: spec must be an object")
    try:
        if kind != "Pod":
            pod_template(obj)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from exc


def _type_name(value: object) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__)


# ---- what-if edits ----------------------------------------------------------------------------------
def pod_specs(obj: JsonObject) -> Iterator[JsonObject]:
    """The pod spec(s) inside an object, to edit in place: a Pod's spec, a workload's template spec."""
    if is_list(obj):
        for item in obj.get("items") or []:
            yield from pod_specs(item)
        return
    kind = obj.get("kind")
    spec = obj.setdefault("spec", {})
    if kind == "CronJob":
        spec = spec.setdefault("jobTemplate", {}).setdefault("spec", {})
    if kind != "Pod":
        spec = spec.setdefault("template", {}).setdefault("spec", {})
    yield spec


def with_priority_class(obj: Mapping[str, Any], priority_class: str | None) -> JsonObject:
    """A copy of ``obj`` whose pods ask for ``priority_class`` (their own priority/preemptionPolicy dropped,
    as ``preview.with_priority_class`` does, so admission computes them from the class)."""
    result: JsonObject = copy.deepcopy(dict(obj))
    if priority_class:
        for spec in pod_specs(result):
            spec["priorityClassName"] = priority_class
            spec.pop("priority", None)
            spec.pop("preemptionPolicy", None)
    return result


# ---- pods for a dry-run create ----------------------------------------------------------------------
def pod_manifests(obj: Mapping[str, Any], *, namespace: str | None, replicas: int | None,
                  nodes: Sequence[Node] | None = None) -> list[JsonObject]:
    """The Pod objects ``obj`` stands for, in order, named as ``workloads.expand_object`` names them
    (``workloads.replica_name``); a DaemonSet's, one per eligible node of ``nodes``."""
    if is_list(obj):
        return [pod for item in obj.get("items") or []
                for pod in pod_manifests(item, namespace=namespace, replicas=replicas, nodes=nodes)]
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    ns = namespace or meta.get("namespace") or "default"
    if obj.get("kind") == "DaemonSet":
        if nodes is None:
            raise InvalidInput("a DaemonSet runs one pod per eligible node: its preview needs the cluster's nodes")
        return daemonset_pod_objects(obj, ns, nodes)
    if obj.get("kind") == "Pod":
        template: Mapping[str, Any] = obj
        count = 1
    else:
        template, count = pod_template(obj)
    count = count if replicas is None else replicas
    generate_name = obj.get("kind") == "Pod" and not meta.get("name") and count == 1
    base = str(meta.get("name") or meta.get("generateName") or "pod").rstrip("-")
    template_meta: Mapping[str, Any] = template.get("metadata") or {}
    pods = []
    for i in range(count):
        metadata: JsonObject = {k: copy.deepcopy(v) for k, v in template_meta.items()
                                if k in ("labels", "annotations")}
        if generate_name:
            metadata["generateName"] = meta["generateName"]
        else:
            metadata["name"] = replica_name(base, i, count)
        metadata["namespace"] = ns
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                     "spec": copy.deepcopy(template.get("spec") or {})})
    return pods


# ---- TYPE/NAME ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ResourceType:
    kind: str
    plural: str
    api_version: str  # "v1" or "group/version"
    short_names: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        return self.api_version.split("/")[0] if "/" in self.api_version else ""

    def path(self, namespace: str, name: str) -> str:
        return f"{self.collection_path(namespace)}/{name}"

    def collection_path(self, namespace: str) -> str:
        prefix = f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"
        return f"{prefix}/namespaces/{namespace}/{self.plural}"

    @property
    def qualified(self) -> str:
        """``deployments.apps``: how the API server names the resource in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCE_TYPES = (
    ResourceType("Pod", "pods", "v1", ("po",)),
    ResourceType("Deployment", "deployments", "apps/v1", ("deploy",)),
    ResourceType("StatefulSet", "statefulsets", "apps/v1", ("sts",)),
    ResourceType("ReplicaSet", "replicasets", "apps/v1", ("rs",)),
    ResourceType("Job", "jobs", "batch/v1"),
    ResourceType("CronJob", "cronjobs", "batch/v1", ("cj",)),
)


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    resource: ResourceType
    name: str

    def __str__(self) -> str:
        return f"{self.resource.kind.lower()}/{self.name}"


def resource_type(text: str) -> ResourceType:
    """``deploy``, ``deployment``, ``deployments``, ``deployment.apps`` or ``deployments.v1.apps``."""
    base, _, qualifier = text.lower().partition(".")
    for resource in RESOURCE_TYPES:
        if base in (resource.kind.lower(), resource.plural, *resource.short_names):
            version = resource.api_version.split("/")[-1]
            if qualifier in ("", resource.group, f"{version}.{resource.group}".strip(".")):
                return resource
    names = ", ".join(r.plural for r in RESOURCE_TYPES)
    raise InvalidInput(f'unsupported resource type "{text}": expected one of {names}')


def parse_workload_ref(words: Sequence[str]) -> WorkloadRef:
    """``TYPE/NAME`` (one word) or ``TYPE NAME`` (two words), as kubectl accepts them."""
    if len(words) == 1 and "/" in words[0]:
        kind, _, name = words[0].partition("/")
    elif len(words) == 2 and "/" not in words[0]:
        kind, name = words
    else:
        raise InvalidInput(f"expected TYPE/NAME (e.g. deployment/web), got {' '.join(words)!r}")
    if not kind or not name or "/" in name:
        raise InvalidInput(f"expected TYPE/NAME (e.g. deployment/web), got {' '.join(words)!r}")
    return WorkloadRef(resource_type(kind), name)


def scale_up_object(obj: Mapping[str, Any], ref: WorkloadRef, replicas: int) -> JsonObject:
    """The fetched object as a manifest for ``replicas`` more pods: no status or server-set metadata;
    a Pod loses its node binding and prediction annotation, so the copy is scheduled afresh."""
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    clean_meta: JsonObject = {"name": meta.get("name") or ref.name, "namespace": meta.get("namespace")}
    for key in ("labels", "annotations"):
        if meta.get(key):
            clean_meta[key] = dict(meta[key])
    annotations = clean_meta.get("annotations")
    if annotations:
        annotations.pop(PREDICTION_ANNOTATION, None)
    spec: JsonObject = copy.deepcopy(dict(obj.get("spec") or {}))
    if ref.resource.kind == "Pod":
        spec.pop("nodeName", None)
    result: JsonObject = {"apiVersion": ref.resource.api_version, "kind": ref.resource.kind,
                          "metadata": clean_meta, "spec": spec}
    check_object(result, str(ref))
    return result
