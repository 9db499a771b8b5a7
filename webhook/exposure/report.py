"""A namespace's exposure as a ``wgpolicyk8s.io/v1alpha2`` PolicyReport (docs/interfaces.md §7).

One report per namespace, named ``preemptguard-exposure``, written by the server in that namespace (so the
namespace's users read it with their own RBAC) and printed by ``kubectl preempt-preview exposure``. Results:

- one ``preemptible-pods`` result per priority band: ``warn`` when a class that *other* tenants may use could
  preempt the band, else ``pass``; its ``properties`` count the pods, the PDB-protected ones, and each
  preempting class with the number of other tenants that may use it (never which);
- one ``pdb-budget`` result per PodDisruptionBudget: the running pods it selects (the first names, the whole
  count) and ``status.disruptionsAllowed``; ``warn`` when no disruption is left.

The ``preemptguard.io/exposure-hash`` annotation is a digest of everything but the timestamps: the server
rewrites a report only when it changes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from webhook.exposure.model import NamespaceExposure, PdbBudget, PreemptingClass, PriorityBand

API_VERSION = "wgpolicyk8s.io/v1alpha2"
KIND = "PolicyReport"
REPORT_NAME = "preemptguard-exposure"
POLICY = "preemptguard-exposure"
RULE_BAND = "preemptible-pods"
RULE_PDB = "pdb-budget"
CATEGORY = "Preemption"
SOURCE = "preemptguard"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "preemptguard"
HASH_ANNOTATION = "preemptguard.io/exposure-hash"
RESULTS = ("pass", "fail", "warn", "error", "skip")
CLASS_PROPERTY_PREFIX = "class."
NO_CLASS = "(none)"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def preempting_class_phrase(cls: PreemptingClass) -> str:
    """``high (100000; 3 other tenants may use it)``."""
    others = "no other tenant" if not cls.other_tenants else plural(cls.other_tenants, "other tenant")
    own = "" if cls.own_tenant else ", not yours"
    return f"{cls.name} ({cls.value}; {others} may use it{own})"


def _class_property(cls: PreemptingClass) -> str:
    restricted = ",".join(cls.restricted_by) or "none"
    return (f"value={cls.value} otherTenants={cls.other_tenants} ownTenant={str(cls.own_tenant).lower()} "
            f"restrictedBy={restricted}")


def band_message(band: PriorityBand) -> str:
    classes = ", ".join(c or NO_CLASS for c in band.classes)
    head = f"{plural(band.pods, 'running pod')} at priority {band.priority} ({classes})"
    if not band.preempting_classes:
        what = (f"no PriorityClass above {band.priority} preempts (preemptionPolicy PreemptLowerPriority): "
                "nothing can preempt them")
    else:
        listed = ", ".join(preempting_class_phrase(c) for c in band.preempting_classes)
        count = len(band.preempting_classes)
        what = f"{count} {'PriorityClass' if count == 1 else 'PriorityClasses'} could preempt them: {listed}"
    protected = f"; {band.pdb_protected} of them selected by a PodDisruptionBudget" if band.pdb_protected else ""
    return f"{head}: {what}{protected}"


def _band_content(band: PriorityBand) -> dict[str, Any]:
    properties = {
        "priority": str(band.priority),
        "priorityClasses": ",".join(c or NO_CLASS for c in band.classes),
        "runningPods": str(band.pods),
        "pdbProtectedPods": str(band.pdb_protected),
        "preemptingClasses": ",".join(c.name for c in band.preempting_classes),
        "otherTenantPreemptingClasses": ",".join(c.name for c in band.preempting_classes if c.other_tenants),
    }
    for cls in band.preempting_classes:
        properties[CLASS_PROPERTY_PREFIX + cls.name] = _class_property(cls)
    warn = band.other_tenants_can_preempt
    return {
        "policy": POLICY, "rule": RULE_BAND, "category": CATEGORY, "source": SOURCE,
        "result": "warn" if warn else "pass", "severity": "medium" if warn else "info", "scored": False,
        "message": band_message(band), "properties": properties,
    }


def pdb_message(pdb: PdbBudget) -> str:
    left = (f"{plural(pdb.disruptions_allowed, 'disruption')} allowed" if pdb.disruptions_allowed > 0
            else "no disruption allowed: preempting any of them violates it")
    return f"PodDisruptionBudget {pdb.name} selects {plural(pdb.pods, 'running pod')}; {left}"


# The last PDB result made per (namespace, PDB name), with its budget and its bytes for the hash: the exposure scan
# makes a namespace's report again whenever a pod of it changes, and most of its PDBs' budgets have not (the index
# keeps their PdbBudget objects, compute.py). Bounded by the PDBs seen; the results are never mutated.
_PDB_CONTENTS: dict[tuple[str, str], tuple[PdbBudget, dict[str, Any], bytes]] = {}
_PDB_CONTENTS_MAX = 100_000


def _pdb_content(namespace: str, pdb: PdbBudget) -> tuple[dict[str, Any], bytes]:
    """A PDB's result without its timestamp, and its JSON as ``content_hash`` reads it."""
    kept = _PDB_CONTENTS.get((namespace, pdb.name))
    if kept is not None and (kept[0] is pdb or kept[0] == pdb):
        return kept[1], kept[2]
    names = ",".join(pdb.pod_names)
    if pdb.pods > len(pdb.pod_names):
        names += f" (+{pdb.pods - len(pdb.pod_names)} more)"
    warn = pdb.pods > 0 and pdb.disruptions_allowed <= 0
    content = {
        "policy": POLICY, "rule": RULE_PDB, "category": CATEGORY, "source": SOURCE,
        "result": "warn" if warn else "pass", "severity": "low" if warn else "info", "scored": False,
        "message": pdb_message(pdb),
        "resources": [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "namespace": namespace,
                       "name": pdb.name}],
        "properties": {"protectedPods": str(pdb.pods), "disruptionsAllowed": str(pdb.disruptions_allowed),
                       "pods": names},
    }
    serialized = orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
    if len(_PDB_CONTENTS) >= _PDB_CONTENTS_MAX:
        _PDB_CONTENTS.clear()
    _PDB_CONTENTS[(namespace, pdb.name)] = (pdb, content, serialized)
    return content, serialized


def summarize(results: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(RESULTS, 0)
    for result in results:
        counts[result["result"]] += 1
    return counts


def content_hash(report: Mapping[str, Any]) -> str:
    """A digest of the report's scope, results and summary, without timestamps."""
    results = [orjson.dumps({k: v for k, v in r.items() if k != "timestamp"}, option=orjson.OPT_SORT_KEYS)
               for r in report.get("results") or ()]
    return _digest(report.get("scope"), results, report.get("summary"))


def _digest(scope: object, results: Sequence[bytes], summary: object) -> str:
    """``sha256`` of ``{"results": [...], "scope": ..., "summary": ...}`` as orjson writes it with sorted keys, from
    each result's own JSON (so a result kept from the last report is not serialized again)."""
    sha = hashlib.sha256(b'{"results":[')
    sha.update(b",".join(results))
    sha.update(b'],"scope":')
    sha.update(orjson.dumps(scope, option=orjson.OPT_SORT_KEYS))
    sha.update(b',"summary":')
    sha.update(orjson.dumps(summary, option=orjson.OPT_SORT_KEYS))
    sha.update(b"}")
    return sha.hexdigest()[:32]


def policy_report(exposure: NamespaceExposure, *, timestamp: int) -> dict[str, Any]:
    """The PolicyReport of one namespace (``timestamp``: Unix seconds, the results' time)."""
    namespace = exposure.namespace
    contents = [_band_content(band) for band in exposure.bands]
    serialized = [orjson.dumps(content, option=orjson.OPT_SORT_KEYS) for content in contents]
    for pdb in exposure.pdbs:
        content, json = _pdb_content(namespace, pdb)
        contents.append(content)
        serialized.append(json)
    stamp = {"seconds": timestamp, "nanos": 0}
    scope = {"apiVersion": "v1", "kind": "Namespace", "name": namespace}
    summary = summarize(contents)
    report: dict[str, Any] = {
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": REPORT_NAME, "namespace": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY},
                     "annotations": {HASH_ANNOTATION: _digest(scope, serialized, summary)}},
        "scope": scope,
        "summary": summary,
        "results": [{**content, "timestamp": stamp} for content in contents],
    }
    return report


def report_list(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Reports as ``kubectl get -o json`` prints several: a ``v1`` List."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": list(reports)}
