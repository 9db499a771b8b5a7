"""The NamespaceLifecycle admission plugin on a pod CREATE, for the paths that predict without the API server
(``/preview``, the plugin's snapshot source, ``verify``): a pod in a namespace that does not exist, or that is
being terminated, never reaches the scheduler.

k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go (``Admit``): a missing namespace is the
API server's NotFound (``namespaces "<ns>" not found``), a terminating one a Forbidden
(``admission.NewForbidden``: the pod's name, else its generateName, else "Unknown").
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.cluster.model import Namespace, Pod


def check_namespace_lifecycle(namespaces: Mapping[str, Namespace], pod: Pod) -> str | None:
    """The API server's message when it refuses to create ``pod`` in its namespace, else None.

    Only where the namespaces are known: a snapshot taken without ``namespaces`` (or a source that does not
    watch them) holds none, and then nothing is refused here."""
    if not namespaces:
        return None
    namespace = namespaces.get(pod.namespace)
    if namespace is None:
        return f'namespaces "{pod.namespace}" not found'
    if namespace.terminating:
        return (f'pods "{pod.name or "Unknown"}" is forbidden: unable to create new content in namespace '
                f"{pod.namespace} because it is being terminated")
    return None
