"""Where the preview comes from, one module per source: a snapshot file offline (``snapshot``), PreemptGuard's
``/preview`` (``webhook_url``), or the cluster of the kubeconfig through a server-side dry-run create, the
default (``dry_run``; ``kube_api`` finds the kubeconfig context as kubectl does and reaches it through
``webhook.kubeapi``). Each answers a ``PreviewAnswer``
(``document``). Nothing is imported here: shell completion loads ``http`` and ``kube_api`` alone."""
