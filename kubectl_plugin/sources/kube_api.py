"""The API server of a kubeconfig context as kubectl finds it (``--kubeconfig``, several ``KUBECONFIG`` files,
``--context``, the context's namespace), reached through the one door to the Kubernetes API
(``webhook.kubeapi``), and the workload a ``TYPE/NAME`` names read from it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from kubectl_plugin.inputs import JsonObject, WorkloadRef
from kubectl_plugin.sources.http import DEFAULT_TIMEOUT, RequestTimeout
from webhook.errors import ApiError, ClusterUnavailable, ConfigError, Forbidden, InvalidInput
from webhook.kubeapi import KubeClient, describe


def kubeconfig_paths(explicit: str | None, environ: Mapping[str, str]) -> list[str]:
    """``--kubeconfig`` alone, else every existing file of ``KUBECONFIG``, else ``~/.kube/config``
    (client-go clientcmd's loading rules)."""
    if explicit:
        if not Path(explicit).expanduser().is_file():
            raise ConfigError(f"--kubeconfig {explicit}: file not found")
        return [str(Path(explicit).expanduser())]
    listed = environ.get("KUBECONFIG", "")
    if listed:
        paths = [str(Path(p).expanduser()) for p in listed.split(os.pathsep) if p]
        found = [p for p in paths if Path(p).is_file()]
        if not found:
            raise ConfigError(f"no kubeconfig found: none of the KUBECONFIG files exist ({listed}); "
                              "use --snapshot FILE to predict offline")
        return found
    default = Path("~/.kube/config").expanduser()
    if not default.is_file():
        raise ConfigError(f"no kubeconfig found ({default} does not exist and KUBECONFIG is not set); "
                          "use --kubeconfig PATH, or --snapshot FILE to predict offline")
    return [str(default)]


async def connect(*, kubeconfig: str | None, context: str | None, environ: Mapping[str, str] | None = None,
                  timeout: RequestTimeout = DEFAULT_TIMEOUT) -> KubeClient:
    """A client of the context kubectl would use: ``--context``, else the first ``current-context`` of the files
    (``kubeconfig_paths``), with ``--request-timeout`` on every request as kubectl sends it."""
    paths = kubeconfig_paths(kubeconfig, os.environ if environ is None else environ)
    configs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as stream:
                configs.append(yaml.safe_load(stream) or {})
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot load kubeconfig {', '.join(paths)}: {describe(exc)}") from exc
    name = context or first_current_context(configs)
    if not name:
        raise ConfigError("the kubeconfig has no current-context; pass --context NAME")
    contexts = {c.get("name") for config in configs if isinstance(config, Mapping)
                for c in config.get("contexts") or () if isinstance(c, Mapping)}
    if name not in contexts:
        raise ConfigError(f'context "{name}" does not exist in the kubeconfig ({", ".join(paths)})')
    return await KubeClient.connect(kubeconfig=paths, context=name, in_cluster=False, timeout=timeout.seconds,
                                    timeout_text=f"{timeout} (--request-timeout)", query=timeout.query())


async def get_object(client: KubeClient, ref: WorkloadRef, namespace: str) -> JsonObject:
    """The object ``TYPE/NAME`` names, as ``kubectl get`` reads it."""
    try:
        document = await client.get(ref.resource.path(namespace, ref.name))
    except ApiError as exc:
        if exc.code == 404:
            raise InvalidInput(f'{ref.resource.qualified} "{ref.name}" not found in namespace "{namespace}"') from exc
        if exc.code == 403:
            raise Forbidden(exc.message) from exc
        if exc.code == 401:
            raise
        raise ClusterUnavailable(f"GET {ref}: HTTP {exc.code}: {exc.message}") from exc
    document.setdefault("kind", ref.resource.kind)
    document.setdefault("apiVersion", ref.resource.api_version)
    return document


def first_current_context(configs: Iterable[object]) -> str:
    """kubectl takes ``current-context`` from the first file that sets it (clientcmd: first file wins);
    kubernetes-asyncio's merger keeps the last one, so it is chosen here."""
    for config in configs:
        if isinstance(config, Mapping) and config.get("current-context"):
            return str(config["current-context"])
    return ""
