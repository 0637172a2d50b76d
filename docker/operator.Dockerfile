# The operator image: the distgnn package with its [operator] extra (kopf, kubernetes,
# pydantic-settings, prometheus-client). No torch: the operator builds manifests and talks to
# the API server only.
#
# Build from the repository root:
#   docker build -f docker/operator.Dockerfile -t ghcr.io/distgnn/operator:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY api/ api/
COPY operator/ operator/
COPY workload/ workload/
# Installed as the README installs it: `pip install '.[operator]'`. DL3013 asks for pinned
# PyPI packages; this installs the local project, whose dependency ranges live in pyproject.toml.
# No bytecode: the kubernetes client's .pyc files alone are ~65 MB, and compiling the imports at
# start costs the operator well under a second of CPU.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir --no-compile '.[operator]' \
    && rm -rf /src \
    && useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin distgnn

WORKDIR /
# A numeric user, so that the kubelet can check runAsNonRoot.
USER 10001:10001
ENTRYPOINT ["python", "-m", "distgnn_operator"]
