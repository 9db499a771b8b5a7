"""Who asks: the one user type, for an AdmissionReview's ``userInfo`` and for an authenticated /preview caller.

Upstream: ``authenticationv1.UserInfo`` (staging/src/k8s.io/api/authentication/v1/types.go), which both the
AdmissionReview request and a TokenReview's ``status.user`` carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class UserInfo:
    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def display_name(self) -> str:
        return self.username or "anonymous"

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) when the user is a service account (``system:serviceaccount:<ns>:<name>``)."""
        if not self.username.startswith(SERVICE_ACCOUNT_PREFIX):
            return None
        namespace, sep, name = self.username[len(SERVICE_ACCOUNT_PREFIX):].partition(":")
        if not sep or not namespace or not name or ":" in name:
            return None
        return namespace, name


ANONYMOUS = UserInfo()
