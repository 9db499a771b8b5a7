"""The configuration file (docs/interfaces.md §6): schema, defaults, and errors that name the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from webhook.cluster.model import LabelSelectorRequirement, ScopedResourceSelectorRequirement
from webhook.config import (
    DEFAULT_CONFIG,
    ClassMatch,
    Config,
    LimitedResource,
    ScoringStrategyConfig,
    load_config,
    load_config_or_defaults,
    parse_config,
)
from webhook.errors import ConfigError

# Every key of the docs/interfaces.md §6 schema, set.
SCHEMA_EXAMPLE = """
prediction:
  budgetMilliseconds: 250
scheduler:
  preemption: enabled
  minCandidateNodesPercentage: 10
  minCandidateNodesAbsolute: 100
  kubernetesVersion: v1.37
quota:
  limitedResources:
    - resource: pods
      matchScopes:
        - {scopeName: PriorityClass, operator: In, values: [system-node-critical, system-cluster-critical]}
  classes:
    - match: {names: [high]}
      allowedNamespaces: [prod-a, prod-b]
guardrails:
  mode: warn
  tenantLabel: tenant
  denyCrossTenantPreemption: true
  maxVictims: 10
  maxPdbViolations: 0
  exempt:
    namespaces: [kube-system]
    users: []
    groups: [system:masters]
"""


def _error(data: Any) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data, "cfg.yaml")
    return str(info.value)


def test_defaults_without_file_warn_and_apply_no_quota() -> None:
    config = DEFAULT_CONFIG
    assert config.guardrails.mode == "warn"
    assert config.quota.limited_resources == () and config.quota.classes == ()
    assert config.quota.is_empty
    assert config.prediction.budget_milliseconds == 250
    assert config.scheduler.preemption_enabled
    assert (config.scheduler.min_candidate_nodes_percentage, config.scheduler.min_candidate_nodes_absolute) == (10, 100)
    assert config.guardrails.max_victims is None and config.guardrails.max_pdb_violations is None
    assert not config.guardrails.deny_cross_tenant_preemption


@pytest.mark.parametrize("data", [{}, {"quota": {}}])
def test_empty_documents_give_the_defaults(data: Any) -> None:
    config = parse_config(data, "empty.yaml")
    assert config.guardrails == DEFAULT_CONFIG.guardrails
    assert config.quota == DEFAULT_CONFIG.quota
    assert config.source == "empty.yaml"


def test_no_file_means_the_defaults_and_a_file_is_loaded(tmp_path: Path) -> None:
    assert load_config_or_defaults(None) is DEFAULT_CONFIG
    path = tmp_path / "config.yaml"
    path.write_text("guardrails:\n  mode: enforce\n")
    assert load_config_or_defaults(path) == load_config(path)
    assert load_config_or_defaults(path).guardrails.mode == "enforce"


def test_schema_example_parses(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(SCHEMA_EXAMPLE)
    config = load_config(path)
    assert isinstance(config, Config) and config.source == str(path)
    assert config.quota.limited_resources == (LimitedResource(
        "pods", match_scopes=(ScopedResourceSelectorRequirement(
            "PriorityClass", "In", ("system-node-critical", "system-cluster-critical")),)),)
    rule = config.quota.classes[0]
    assert rule.match == ClassMatch(names=("high",)) and rule.allowed_namespaces == ("prod-a", "prod-b")
    guardrails = config.guardrails
    assert guardrails.tenant_label == "tenant" and guardrails.deny_cross_tenant_preemption
    assert (guardrails.max_victims, guardrails.max_pdb_violations) == (10, 0)
    assert guardrails.exempt.namespaces == ("kube-system",) and guardrails.exempt.groups == ("system:masters",)


def test_extensions_and_selectors_parse() -> None:
    config = parse_config({
        "scheduler": {"preemption": "disabled", "minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 5},
        "quota": {
            "limitedResources": [{"resource": "pods", "apiGroup": "", "matchContains": ["requests.cpu"],
                                  "matchScopes": [{"scopeName": "BestEffort", "operator": "Exists"}]}],
            "classes": [{"match": {"valueAtLeast": 1000000},
                         "namespaceSelector": {"matchLabels": {"tier": "prod"},
                                               "matchExpressions": [{"key": "team", "operator": "Exists"}]}}],
        },
        "guardrails": {"mode": "enforce", "denyVictimPriorityAtLeast": 1000,
                       "exempt": {"serviceAccounts": ["ci/deployer", "kube-system/*"], "users": ["alice"]}},
    }, "x")
    assert not config.scheduler.preemption_enabled
    assert config.quota.limited_resources[0].match_contains == ("requests.cpu",)
    rule = config.quota.classes[0]
    assert rule.match.value_at_least == 1000000 and rule.allowed_namespaces == ()
    assert rule.namespace_selector is not None
    assert dict(rule.namespace_selector.match_labels) == {"tier": "prod"}
    assert rule.namespace_selector.match_expressions == (LabelSelectorRequirement("team", "Exists"),)
    assert config.guardrails.mode == "enforce" and config.guardrails.deny_victim_priority_at_least == 1000
    assert config.guardrails.exempt.service_accounts == ("ci/deployer", "kube-system/*")


def test_on_unpredictable_follows_the_mode_unless_set() -> None:
    """guardrails.onUnpredictable: unset, deny under enforce and allow under warn; set, it holds (never under
    off, which denies nothing); prediction.previewsPerMinute defaults to 60, 0 turns the limit off."""
    unset = parse_config({}, "x")
    assert unset.guardrails.on_unpredictable is None and unset.prediction.previews_per_minute == 60
    assert [unset.guardrails.unpredictable_action(m) for m in ("off", "warn", "enforce")] == ["allow", "allow", "deny"]
    allow = parse_config({"guardrails": {"onUnpredictable": "allow"}}, "x").guardrails
    assert [allow.unpredictable_action(m) for m in ("off", "warn", "enforce")] == ["allow", "allow", "allow"]
    deny = parse_config({"guardrails": {"onUnpredictable": "deny"}}, "x").guardrails
    assert [deny.unpredictable_action(m) for m in ("off", "warn", "enforce")] == ["allow", "deny", "deny"]
    assert parse_config({"prediction": {"previewsPerMinute": 0}}, "x").prediction.previews_per_minute == 0


def test_bare_yaml_off_is_mode_off(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("guardrails:\n  mode: off\n")
    assert load_config(path).guardrails.mode == "off"


@pytest.mark.parametrize(("data", "message"), [
    ({"guardrails": {"maxVictim": 3}}, "unknown key guardrails.maxVictim"),
    ({"guardrail": {}}, "unknown key guardrail"),
    ({"guardrails": {"exempt": {"user": ["a"]}}}, "unknown key guardrails.exempt.user"),
    ({"quota": {"limitedResources": [{"resource": "pods", "matchScope": []}]}},
     "unknown key quota.limitedResources[0].matchScope"),
    ({"quota": {"classes": [{"match": {"name": ["x"]}, "allowedNamespaces": []}]}},
     "unknown key quota.classes[0].match.name"),
    ({"quota": {"classes": [{"match": {"names": ["x"]}, "namespaceSelector": {"labels": {}}}]}},
     "unknown key quota.classes[0].namespaceSelector.labels"),
    ({"scheduler": {"preemptionEnabled": True}}, "unknown key scheduler.preemptionEnabled"),
])
def test_unknown_keys_are_named(data: Any, message: str) -> None:
    assert message in _error(data)


@pytest.mark.parametrize(("data", "message"), [
    ({"guardrails": {"maxVictims": "10"}}, "guardrails.maxVictims: expected an integer, got str"),
    ({"guardrails": {"maxPdbViolations": True}}, "guardrails.maxPdbViolations: expected an integer, got bool"),
    ({"guardrails": {"maxVictims": 1.5}}, "guardrails.maxVictims: expected an integer, got float"),
    ({"guardrails": {"denyCrossTenantPreemption": "yes"}},
     "guardrails.denyCrossTenantPreemption: expected a boolean, got str"),
    ({"guardrails": {"tenantLabel": 5}}, "guardrails.tenantLabel: expected a string, got int"),
    ({"guardrails": {"exempt": {"namespaces": "kube-system"}}},
     "guardrails.exempt.namespaces: expected a list, got str"),
    ({"guardrails": {"exempt": {"groups": [1]}}}, "guardrails.exempt.groups[0]: expected a string, got int"),
    ({"guardrails": []}, "guardrails: expected a mapping, got list"),
    ({"prediction": {"budgetMilliseconds": "fast"}}, "prediction.budgetMilliseconds: expected an integer, got str"),
    ({"quota": {"limitedResources": {"resource": "pods"}}}, "quota.limitedResources: expected a list, got dict"),
    ("just text", "<root>: expected a mapping, got str"),
])
def test_wrong_types_are_named(data: Any, message: str) -> None:
    assert message in _error(data)


@pytest.mark.parametrize(("data", "message"), [
    ({"guardrails": {"mode": "strict"}}, "guardrails.mode: must be one of off, warn, enforce"),
    ({"guardrails": {"maxVictims": -1}}, "guardrails.maxVictims: must be at least 0"),
    ({"guardrails": {"exempt": {"serviceAccounts": ["deployer"]}}},
     "guardrails.exempt.serviceAccounts[0]: expected <namespace>/<name>"),
    ({"prediction": {"budgetMilliseconds": 0}}, "prediction.budgetMilliseconds: must be at least 1"),
    ({"prediction": {"previewsPerMinute": -1}}, "prediction.previewsPerMinute: must be at least 0"),
    ({"guardrails": {"onUnpredictable": "fail"}}, "guardrails.onUnpredictable: must be one of deny, allow"),
    ({"scheduler": {"preemption": "sometimes"}}, "scheduler.preemption: must be one of enabled, disabled"),
    ({"scheduler": {"minCandidateNodesPercentage": 101}}, "scheduler.minCandidateNodesPercentage: must be between 0"),
    ({"scheduler": {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}}, "cannot both be zero"),
    ({"scheduler": {"kubernetesVersion": "v1.32"}},
     "scheduler.kubernetesVersion: Kubernetes v1.32 is not a release PreemptGuard predicts for (supported: v1.33"),
    ({"scheduler": {"kubernetesVersion": "newest"}}, "scheduler.kubernetesVersion: 'newest' is not a Kubernetes"),
    ({"scheduler": {"kubernetesVersion": 1.34}}, "scheduler.kubernetesVersion"),
    ({"scheduler": {"percentageOfNodesToScore": 101}}, "scheduler.percentageOfNodesToScore: must be between 0 and 100"),
    ({"scheduler": {"interPodAffinity": {"hardPodAffinityWeight": 101}}},
     "scheduler.interPodAffinity.hardPodAffinityWeight: must be between 0 and 100"),
    ({"scheduler": {"interPodAffinity": {"ignorePreferredTermsOfExistingPods": "yes"}}},
     "scheduler.interPodAffinity.ignorePreferredTermsOfExistingPods: expected a boolean"),
    ({"scheduler": {"scoreWeights": {"NodeResourcesFitt": 1}}},
     "scheduler.scoreWeights.NodeResourcesFitt: not a Score plugin of the default profile; known: TaintToleration"),
    ({"scheduler": {"scoreWeights": {"ImageLocality": 101}}}, "scheduler.scoreWeights.ImageLocality: must be between"),
    ({"scheduler": {"scoringStrategy": {"type": "Spread"}}}, "scheduler.scoringStrategy.type: must be one of"),
    ({"scheduler": {"scoringStrategy": {"type": "RequestedToCapacityRatio"}}},
     "scheduler.scoringStrategy.requestedToCapacityRatio: Required value"),
    ({"scheduler": {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}}},
     "scheduler.scoringStrategy.resources[0].weight: must be between 1 and 100"),
    ({"scheduler": {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
        {"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]}}}},
     "scheduler.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value"),
    ({"scheduler": {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
        {"utilization": 50, "score": 11}]}}}},
     "scheduler.scoringStrategy.requestedToCapacityRatio.shape[0].score: must be between 0 and 10"),
])
def test_invalid_values_are_named(data: Any, message: str) -> None:
    assert message in _error(data)


def _limited(**entry: Any) -> dict[str, Any]:
    return {"quota": {"limitedResources": [entry]}}


@pytest.mark.parametrize(("data", "message"), [
    (_limited(matchScopes=[]), "quota.limitedResources[0].resource: Required value"),
    (_limited(resource="pods", matchScopes=[{"scopeName": "PriorityClass", "operator": "In"}]),
     "quota.limitedResources[0].matchScopes[0].values: must be at least one value when `operator` is 'In' or "
     "'NotIn' for scope selector"),
    (_limited(resource="pods", matchScopes=[{"scopeName": "PriorityClass", "operator": "Exists", "values": ["a"]}]),
     "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"),
    (_limited(resource="pods", matchScopes=[{"scopeName": "BestEffort", "operator": "In", "values": ["a"]}]),
     "quota.limitedResources[0].matchScopes[0].operator: must be 'Exist' when scope is any of"),
    (_limited(resource="pods", matchScopes=[{"scopeName": "PriorityClass", "operator": "Equals", "values": ["a"]}]),
     "quota.limitedResources[0].matchScopes[0].operator: 'Equals': not a valid selector operator"),
    (_limited(resource="pods", matchScopes=[{"scopeName": "Priority", "operator": "Exists"}]),
     "quota.limitedResources[0].matchScopes[0].scopeName: unsupported scope 'Priority'"),
    ({"quota": {"classes": [{"match": {}, "allowedNamespaces": []}]}},
     "quota.classes[0].match: must set names or valueAtLeast"),
    ({"quota": {"classes": [{"match": {"names": ["high"]}}]}},
     "quota.classes[0].allowedNamespaces: must set allowedNamespaces or namespaceSelector"),
    ({"quota": {"classes": [{"allowedNamespaces": ["a"]}]}}, "quota.classes[0].match: Required value"),
    ({"quota": {"classes": [{"match": {"names": ["x"]}, "namespaceSelector": {
        "matchExpressions": [{"key": "t", "operator": "In"}]}}]}},
     "quota.classes[0].namespaceSelector.matchExpressions[0].values: must be specified"),
])
def test_upstream_scope_rules_are_validated(data: Any, message: str) -> None:
    assert message in _error(data)


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match=r"absent\.yaml: cannot read configuration"):
        load_config(missing)
    broken = tmp_path / "broken.yaml"
    broken.write_text("guardrails: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml: invalid YAML"):
        load_config(broken)
    typo = tmp_path / "typo.yaml"
    typo.write_text("guardrails:\n  maxVictim: 3\n")
    with pytest.raises(ConfigError, match=r"typo.yaml: unknown key guardrails\.maxVictim$"):
        load_config(typo)


def test_json_and_explicitly_empty_files_load(tmp_path: Path) -> None:
    as_json = tmp_path / "c.json"
    as_json.write_text('{"guardrails": {"mode": "enforce", "maxVictims": 2}}')
    assert load_config(as_json).guardrails.max_victims == 2
    empty = tmp_path / "empty.yaml"
    empty.write_text("{}\n")
    assert load_config(empty).guardrails == DEFAULT_CONFIG.guardrails


@pytest.mark.parametrize(("text", "message"), [
    ("", "the configuration file is empty"),
    ("# only a comment\n\n", "the configuration file is empty"),
    ("guardrails:\n", "guardrails: has no value"),  # cut off after its first line
    ("guardrails:\n  mode: enforce\n  tenantLabel:\n", "guardrails.tenantLabel: has no value"),
])
def test_an_empty_or_cut_off_file_is_refused_not_read_as_the_defaults(tmp_path: Path, text: str,
                                                                      message: str) -> None:
    """Issue #24: a 0-byte or truncated file used to load as the defaults, turning enforce into warn."""
    cut = tmp_path / "config.yaml"
    cut.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(cut)


@pytest.mark.parametrize(("written", "release"), [("v1.34.4", "v1.34"), ("1.36", "v1.36"), ("v1.33", "v1.33")])
def test_the_release_the_prediction_follows(written: str, release: str) -> None:
    config = parse_config({"scheduler": {"kubernetesVersion": written}}, "x")
    assert config.scheduler.kubernetes_version == release
    assert DEFAULT_CONFIG.scheduler.kubernetes_version == ""  # none written: the newest PreemptGuard knows


def test_the_scoring_of_the_scheduler_profile_is_read() -> None:
    config = parse_config({"scheduler": {
        "percentageOfNodesToScore": 100, "scoreWeights": {"ImageLocality": 0, "TaintToleration": 5},
        "scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": [{"name": "cpu", "weight": 2}],
                            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                   {"utilization": 100, "score": 10}]}}}}, "t")
    scheduler = config.scheduler
    assert scheduler.percentage_of_nodes_to_score == 100
    assert scheduler.score_weights == (("ImageLocality", 0), ("TaintToleration", 5))
    assert scheduler.scoring_strategy == ScoringStrategyConfig("RequestedToCapacityRatio", (("cpu", 2),),
                                                               ((0, 0), (100, 10)))
    affinity = parse_config({"scheduler": {"interPodAffinity": {
        "hardPodAffinityWeight": 10, "ignorePreferredTermsOfExistingPods": True}}}, "t").scheduler
    assert (affinity.hard_pod_affinity_weight, affinity.ignore_preferred_terms_of_existing_pods) == (10, True)
    default = parse_config({}, "t").scheduler
    assert (default.hard_pod_affinity_weight, default.ignore_preferred_terms_of_existing_pods) == (1, False)
    assert (default.percentage_of_nodes_to_score, default.score_weights) == (0, ())
    assert default.scoring_strategy == ScoringStrategyConfig("LeastAllocated", (("cpu", 1), ("memory", 1)), ())
