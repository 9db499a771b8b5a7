"""The HTTP paths and ports of ``preempt-guard serve`` (docs/interfaces.md §2), declared once.

The webhook configurations, Service and probes in manifests/ are tested against these values.
"""

from __future__ import annotations

MUTATE_PODS_PATH = "/mutate/pods"
VALIDATE_PRIORITYCLASSES_PATH = "/validate/priorityclasses"
PREVIEW_PATH = "/preview"
HEALTHZ_PATH = "/healthz"
READYZ_PATH = "/readyz"
METRICS_PATH = "/metrics"
# On the metrics listener: the live observer's summary (docs/interfaces.md §9).
DEBUG_PREDICTIONS_PATH = "/debug/predictions"

DEFAULT_PORT = 8443
DEFAULT_METRICS_PORT = 9090

# PreemptGuard's webhook configurations (manifests/base/webhooks.yaml) and their webhook entries.
MUTATING_WEBHOOK_CONFIGURATION = "preemptguard.io"
VALIDATING_WEBHOOK_CONFIGURATION = "preemptguard.io"
PODS_WEBHOOK = "pods.preemptguard.io"
PRIORITYCLASSES_WEBHOOK = "priorityclasses.preemptguard.io"

# A namespace with this label set to "true" is never sent to the pod webhook (its namespaceSelector).
IGNORE_NAMESPACE_LABEL = "preemptguard.io/ignore"
