"""The PolicyReport document (webhook.exposure.report): valid against the upstream CRD's v1alpha2 schema that the
exposure-reports component installs, its hash blind to timestamps only, its words."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import yaml

from webhook.exposure import NamespaceExposure, PdbBudget, PreemptingClass, PriorityBand
from webhook.exposure.report import HASH_ANNOTATION, content_hash, policy_report, report_list

CRD = Path(__file__).resolve().parents[2] / "manifests" / "components" / "exposure-reports" / "policyreport-crd.yaml"

EXPOSED = NamespaceExposure("team-b", (
    PriorityBand(10, ("", "low"), 7, 3, (PreemptingClass("high", 1000, 3, True),
                                         PreemptingClass("vip", 5000, 0, False, ("quota.classes[0]",)))),
    PriorityBand(1000, ("high",), 2, 0, ()),
), (PdbBudget("web", 3, ("web-1", "web-2", "web-3"), 1),))


def v1alpha2_schema() -> dict[str, Any]:
    crd = next(d for d in yaml.safe_load_all(CRD.read_text()) if d)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2"]
    return dict(version["schema"]["openAPIV3Schema"])


def test_the_report_is_a_valid_v1alpha2_policy_report() -> None:
    report = policy_report(EXPOSED, timestamp=1_700_000_000)
    jsonschema.validate(report, v1alpha2_schema())
    assert report["apiVersion"] == "wgpolicyk8s.io/v1alpha2" and report["kind"] == "PolicyReport"
    assert report["metadata"]["name"] == "preemptguard-exposure" and report["metadata"]["namespace"] == "team-b"
    assert report["summary"] == {"pass": 2, "fail": 0, "warn": 1, "error": 0, "skip": 0}
    assert all(isinstance(v, str) for r in report["results"] for v in r["properties"].values())
    jsonschema.validate(report_list([report]), {"type": "object", "required": ["items"]})


def test_the_bands_and_budgets_read_as_a_tenant_would_want_them() -> None:
    low, high, pdb = policy_report(EXPOSED, timestamp=0)["results"]
    assert low["result"] == "warn" and low["message"] == (
        "7 running pods at priority 10 ((none), low): 2 PriorityClasses could preempt them: high (1000; 3 other "
        "tenants may use it), vip (5000; no other tenant may use it, not yours); 3 of them selected by a "
        "PodDisruptionBudget")
    assert low["properties"]["class.vip"] == "value=5000 otherTenants=0 ownTenant=false restrictedBy=quota.classes[0]"
    assert low["properties"]["otherTenantPreemptingClasses"] == "high"
    assert high["result"] == "pass" and "nothing can preempt them" in high["message"]
    assert pdb["resources"] == [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "namespace": "team-b",
                                 "name": "web"}]
    assert pdb["message"] == "PodDisruptionBudget web selects 3 running pods; 1 disruption allowed"


def test_the_hash_follows_the_content_and_ignores_the_time() -> None:
    first = policy_report(EXPOSED, timestamp=1)
    later = policy_report(EXPOSED, timestamp=2)
    assert first["metadata"]["annotations"][HASH_ANNOTATION] == later["metadata"]["annotations"][HASH_ANNOTATION]
    changed = policy_report(NamespaceExposure("team-b", EXPOSED.bands[:1], EXPOSED.pdbs), timestamp=1)
    assert content_hash(changed) != content_hash(first)


def test_the_hash_is_the_sha256_of_the_report_without_timestamps_as_earlier_releases_wrote_it() -> None:
    """A report the API holds from an earlier release is not rewritten for an unchanged exposure: the digest is
    still sha256 over ``{"results", "scope", "summary"}`` with sorted keys (orjson's compact JSON), however it is
    computed now (from each result's JSON, kept from the last report made)."""
    for timestamp in (5, 6):  # the second report is made from the kept PDB results
        report = policy_report(EXPOSED, timestamp=timestamp)
        stripped = [{k: v for k, v in r.items() if k != "timestamp"} for r in report["results"]]
        text = orjson.dumps({"scope": report["scope"], "results": stripped, "summary": report["summary"]},
                            option=orjson.OPT_SORT_KEYS)
        expected = hashlib.sha256(text).hexdigest()[:32]
        assert report["metadata"]["annotations"][HASH_ANNOTATION] == expected == content_hash(report)
        assert all(r["timestamp"] == {"seconds": timestamp, "nanos": 0} for r in report["results"])


def test_a_pdb_result_kept_from_the_last_report_follows_its_budget() -> None:
    before = policy_report(EXPOSED, timestamp=1)["results"][-1]
    spent = PdbBudget("web", 3, ("web-1", "web-2", "web-3"), 0)
    after = policy_report(NamespaceExposure("team-b", EXPOSED.bands, (spent,)), timestamp=1)["results"][-1]
    assert before["properties"]["disruptionsAllowed"] == "1" and before["result"] == "pass"
    assert after["properties"]["disruptionsAllowed"] == "0" and after["result"] == "warn"
    elsewhere = policy_report(NamespaceExposure("team-c", EXPOSED.bands, EXPOSED.pdbs), timestamp=1)["results"][-1]
    assert elsewhere["resources"][0]["namespace"] == "team-c"
