"""The DefaultTolerationSeconds admission plugin on a pod CREATE: every pod tolerates the node controller's
NoExecute taints ``node.kubernetes.io/not-ready`` and ``node.kubernetes.io/unreachable`` (for 300 s) unless it
tolerates them already; the scheduler's TaintToleration filter then lets it onto nodes tainted so.

Upstream: plugin/pkg/admission/defaulttolerationseconds/admission.go (``Admit``; the seconds are
``--default-not-ready-toleration-seconds``, which the scheduler's filters do not read).
"""

from __future__ import annotations

from webhook.cluster.model import Toleration

TAINT_NODE_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY_TOLERATION = Toleration(key=TAINT_NODE_NOT_READY, operator="Exists", effect="NoExecute")
UNREACHABLE_TOLERATION = Toleration(key=TAINT_NODE_UNREACHABLE, operator="Exists", effect="NoExecute")


def _covers(toleration: Toleration, key: str) -> bool:
    """Upstream's test: the key (or every key) with NoExecute (or every effect); the operator is not read."""
    return toleration.key in (key, "") and toleration.effect in ("NoExecute", "")


def default_toleration_seconds(tolerations: tuple[Toleration, ...]) -> tuple[Toleration, ...]:
    added = tuple(default for default, key in ((NOT_READY_TOLERATION, TAINT_NODE_NOT_READY),
                                               (UNREACHABLE_TOLERATION, TAINT_NODE_UNREACHABLE))
                  if not any(_covers(t, key) for t in tolerations))
    return tolerations + added if added else tolerations
