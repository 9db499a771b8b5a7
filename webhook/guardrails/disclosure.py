"""What one requester may be told about a prediction's victims (docs/interfaces.md §7).

A tenant is a namespace, or with ``guardrails.tenantLabel`` the namespaces sharing that label's value. Every
answer to an admission request names victims (pod and namespace names) only in the requesting pod's tenant;
victims of other tenants are counts, with their PDB violations, and no namespace name. ``disclosure:
cluster`` names everything (single-tenant clusters).

Where nobody authenticated the caller (no ``--client-ca``), the review's namespace is only a claim: anyone who
can reach the webhook could claim any namespace. Then nothing is named (``unverifiedDisclosure: counts``, the
default), or only victims in the claimed namespace itself (``namespace``, at the operator's risk).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.cluster.model import Namespace, labels_of_namespace
from webhook.config import DisclosureMode, UnverifiedDisclosure
from webhook.preemption.preview import summarize
from webhook.preemption.results import PreemptionResult, VictimInfo

OTHER_TENANTS_KEY = "otherTenantVictims"


@dataclass(frozen=True, slots=True)
class Tenant:
    """A namespace's tenant: the value of ``tenantLabel``, or the namespace itself when unlabelled."""

    by_label: bool
    name: str

    def describe(self, tenant_label: str | None) -> str:
        return f"{tenant_label}={self.name}" if self.by_label else f"namespace {self.name}"


def tenant_of(namespace: str, namespaces: Mapping[str, Namespace], tenant_label: str | None) -> Tenant:
    if tenant_label:
        value = labels_of_namespace(namespaces, namespace).get(tenant_label)
        if value:
            return Tenant(True, value)
    return Tenant(False, namespace)


# Whose victims an audience may name: its tenant's, its own namespace's only, or nobody's.
NameScope = Literal["tenant", "namespace", "nothing"]


@dataclass(frozen=True, slots=True)
class Audience:
    """Who is told: the requesting pod's tenant (``everything`` under ``disclosure: cluster``). ``tenant`` is
    always the pod's tenant (the guardrail rules judge by it); ``scope`` says whose victims may be named."""

    tenant: Tenant
    namespaces: Mapping[str, Namespace]
    tenant_label: str | None
    everything: bool = False
    namespace: str = ""  # the requesting pod's namespace
    scope: NameScope = "tenant"

    def may_name(self, victim: VictimInfo) -> bool:
        return self.names_namespace(victim.namespace)

    def names_namespace(self, namespace: str) -> bool:
        """Whether pods of ``namespace`` may be named to this audience."""
        if self.everything:
            return True
        if self.scope == "nothing":
            return False
        if self.scope == "namespace":
            return namespace == self.namespace
        return tenant_of(namespace, self.namespaces, self.tenant_label) == self.tenant

    @property
    def unnamed(self) -> str:
        """How victims this audience may not hear named are called: their tenant is never the requester's
        business, and to an unauthenticated caller even its own are not named."""
        if self.scope == "nothing":
            return "(names withheld)"
        return "of other namespaces" if self.scope == "namespace" else "of other tenants"

    @property
    def names_tenant(self) -> bool:
        """Whether the tenant itself (its label value) may be named: only to an authenticated audience."""
        return self.everything or self.scope == "tenant"

    def split(self, victims: Iterable[VictimInfo]) -> tuple[list[VictimInfo], list[VictimInfo]]:
        """(victims that may be named, victims of other tenants), each in the given order."""
        named: list[VictimInfo] = []
        hidden: list[VictimInfo] = []
        for victim in victims:
            (named if self.may_name(victim) else hidden).append(victim)
        return named, hidden


def audience_of(namespace: str, namespaces: Mapping[str, Namespace], tenant_label: str | None,
                mode: DisclosureMode, *, unverified: UnverifiedDisclosure | None = None) -> Audience:
    """The audience of an answer about a pod of ``namespace``; ``unverified``: the caller was not authenticated,
    and this is what ``guardrails.unverifiedDisclosure`` allows it to be told."""
    scope: NameScope = "tenant" if unverified is None else "namespace" if unverified == "namespace" else "nothing"
    return Audience(tenant_of(namespace, namespaces, tenant_label), namespaces, tenant_label, mode == "cluster",
                    namespace, scope)


FULL_DETAIL = Audience(Tenant(False, ""), {}, None, everything=True)
# Names no victim, namespace or tenant: counts only (GET /debug/predictions).
COUNTS_ONLY = Audience(Tenant(False, ""), {}, None, scope="nothing")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def count_by_namespace(victims: Iterable[VictimInfo]) -> dict[str, int]:
    """Victim counts per namespace, most victims first (then by name)."""
    counts: dict[str, int] = {}
    for victim in victims:
        counts[victim.namespace] = counts.get(victim.namespace, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def other_tenants_phrase(hidden: list[VictimInfo], unnamed: str = "of other tenants") -> str:
    """``3 pods of other tenants, 1 PDB violation`` (no namespace name; ``unnamed``: ``Audience.unnamed``)."""
    violations = sum(v.pdb_violation for v in hidden)
    note = f", {plural(violations, 'PDB violation')}" if violations else ""
    return f"{plural(len(hidden), 'pod')} {unnamed}{note}"


def _redacted_result(entry: Mapping[str, Any], result: PreemptionResult, audience: Audience) -> dict[str, Any]:
    _named, hidden = audience.split(result.victims)
    if not hidden:
        return dict(entry)
    shown = [v for v, victim in zip(entry["victims"], result.victims, strict=True) if audience.may_name(victim)]
    return {**entry, "victims": shown,
            OTHER_TENANTS_KEY: {"count": len(hidden), "pdbViolations": sum(v.pdb_violation for v in hidden)}}


def redact_preview_document(document: Mapping[str, Any], results: list[PreemptionResult],
                            audience: Audience) -> dict[str, Any]:
    """A PreemptionPreview (``build_preview(results)``) with other tenants' victims reduced to counts: each
    result keeps its own tenant's victims and gains ``otherTenantVictims: {count, pdbViolations}``; the
    summary's ``namespacesAffected`` lists only the requester's tenant (``victims`` still counts every one)."""
    if audience.everything:
        return dict(document)
    entries = [_redacted_result(entry, result, audience)
               for entry, result in zip(document["results"], results, strict=True)]
    return {**document, "results": entries, "summary": summarize(entries)}
