"""Runs the operator: ``python -m distgnn_operator`` (the chart's Deployment command)."""

from __future__ import annotations

import logging

import kopf

from distgnn_operator.settings import OperatorSettings


def main() -> int:
    """Serve DistGNNJobs in the configured namespaces (or the whole cluster) until stopped."""
    settings = OperatorSettings()
    level = settings.log_level.upper()
    kopf.configure(debug=level == "DEBUG", quiet=level in ("WARNING", "ERROR"))
    logging.getLogger().setLevel(level)
    # The reconciler's HTTP client logs every request: only in DEBUG.
    logging.getLogger("urllib3").setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)
    import distgnn_operator.handlers  # noqa: F401 - registers the handlers

    identity = settings.pod_name or None
    kopf.run(
        standalone=not settings.peering,
        peering_name=settings.peering or None,
        priority=settings.effective_peering_priority(),
        clusterwide=not settings.namespaces,
        namespaces=settings.namespaces,
        liveness_endpoint=(
            f"http://0.0.0.0:{settings.health_port}/healthz" if settings.health_port else None
        ),
        identity=identity,  # type: ignore[arg-type]
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
