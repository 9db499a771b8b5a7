"""The names of the contract other tools rely on, declared once: the HTTP paths and ports of ``preempt-guard
serve``, the webhook configurations, and the labels and annotations PreemptGuard reads and writes
(docs/interfaces.md §2).

The webhook configurations, Service, probes and label policies in manifests/ are tested against these values.
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
# POST /preview over TLS without a client certificate (--preview-port; the default under --client-ca).
DEFAULT_PREVIEW_PORT = 8444

# PreemptGuard's webhook configurations (manifests/base/webhooks.yaml) and their webhook entries.
MUTATING_WEBHOOK_CONFIGURATION = "preemptguard.io"
VALIDATING_WEBHOOK_CONFIGURATION = "preemptguard.io"
PODS_WEBHOOK = "pods.preemptguard.io"
PRIORITYCLASSES_WEBHOOK = "priorityclasses.preemptguard.io"

# A namespace with this label set to "true" is never sent to the pod webhook (its namespaceSelector).
IGNORE_NAMESPACE_LABEL = "preemptguard.io/ignore"
# A namespace's guardrail mode (off, warn, enforce), overriding guardrails.mode.
MODE_LABEL = "preemptguard.io/mode"
# On an admitted pod: the prediction (compact JSON; on a dry run the whole PreemptionPreview the plugin reads).
PREDICTION_ANNOTATION = "preemptguard.io/prediction"
# On a pod predicted at CREATE and followed (docs/interfaces.md §9): at mutating admission the pod has no UID
# (and with generateName no name), so the observer finds it by this id.
PREDICTION_ID_ANNOTATION = "preemptguard.io/prediction-id"
# On a pod predicted at CREATE and followed, beside the id: the guardrail decision it was admitted under
# (``warned: denyCrossTenantPreemption``), which the victims' tenants are told (docs/interfaces.md §7).
GUARDRAIL_DECISION_ANNOTATION = "preemptguard.io/guardrail-decision"
# The Lease whose holder writes what only one replica may write (preemption Events, exposure PolicyReports).
LEADER_ELECTION_LEASE = "preemptguard"
