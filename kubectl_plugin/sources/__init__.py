"""Where the preview comes from, one module per source: a snapshot file offline (``snapshot``), PreemptGuard's
``/preview`` (``webhook_url``), or the cluster of the kubeconfig through a server-side dry-run create, the
default (``dry_run``, over the API-server client of ``kube_api``). Each answers a ``PreviewAnswer``
(``document``)."""

from kubectl_plugin.sources.document import PreviewAnswer, PreviewSource
from kubectl_plugin.sources.dry_run import SEQUENTIAL_NOTE, ClusterPreviewSource
from kubectl_plugin.sources.kube_api import KubeCluster
from kubectl_plugin.sources.snapshot import SnapshotPreviewSource
from kubectl_plugin.sources.webhook_url import WebhookPreviewSource

__all__ = ["SEQUENTIAL_NOTE", "ClusterPreviewSource", "KubeCluster", "PreviewAnswer", "PreviewSource",
           "SnapshotPreviewSource", "WebhookPreviewSource"]
