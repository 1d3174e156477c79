"""Where the Kubernetes API is and how to reach it: a URL, the cluster, a kubeconfig."""

from __future__ import annotations

import os

import kubernetes.client
import kubernetes.config

from runtime.core.errors import ConfigurationError
from runtime.providers.settings import KubernetesProviderSettings

_POOL_CONNECTIONS = 32
"""HTTP connections kept to the API server (many sandbox calls run at once)."""


def client_configuration(settings: KubernetesProviderSettings) -> kubernetes.client.Configuration:
    configuration = kubernetes.client.Configuration()
    try:
        if settings.api_url:
            configuration.host = settings.api_url.rstrip("/")
        elif os.environ.get("KUBERNETES_SERVICE_HOST") and settings.kubeconfig is None:
            kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        else:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(settings.kubeconfig) if settings.kubeconfig else None,
                context=settings.context,
                client_configuration=configuration,
            )
    except kubernetes.config.ConfigException as exc:
        msg = (
            f"no Kubernetes API to use: {exc} (set SIESTA_PROVIDER__KUBECONFIG, "
            "SIESTA_PROVIDER__API_URL, or run in a cluster)"
        )
        raise ConfigurationError(msg) from exc
    configuration.connection_pool_maxsize = _POOL_CONNECTIONS
    return configuration
