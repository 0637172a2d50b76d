"""Where the operator finds the API server: the kubeconfig setting, else the in-cluster
ServiceAccount, else ~/.kube/config. kopf's login and the reconciler's client share it."""

from __future__ import annotations

from typing import Any

from kubernetes import client as kube_client
from kubernetes import config as kube_config

from distgnn_operator.settings import OperatorSettings


def load_configuration(settings: OperatorSettings) -> Any:
    """A kubernetes.client.Configuration for the settings (read at call time, not import)."""
    cfg = kube_client.Configuration()
    if settings.kubeconfig:
        kube_config.load_kube_config(config_file=settings.kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
        return cfg
    try:
        kube_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    except kube_config.ConfigException:
        kube_config.load_kube_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return cfg


def bearer_token(cfg: Any) -> tuple[str | None, str | None]:
    """The (scheme, token) of a configuration's Authorization header, if any."""
    header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix(
        "authorization"
    )
    if not header:
        return None, None
    scheme, _, token = header.partition(" ")
    return (scheme, token) if token else (None, scheme)
