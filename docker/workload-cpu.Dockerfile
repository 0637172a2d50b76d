# The CPU workload image: the distgnn package with its [workload] extra (torch, PyG, pymetis),
# torch from PyTorch's CPU-only index when TORCH_INDEX_URL names it. No kopf, no kubernetes.
# The operator runs the partition Job and the pods without GPUs in it, with
# `python -m distgnn_workload.<role>`.
#
# Build from the repository root:
#   docker build -f docker/workload-cpu.Dockerfile -t ghcr.io/distgnn/workload:0.1.0-cpu .
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE}

# An extra index for CPU-only torch wheels (PyTorch's CPU index); their "+cpu" versions sort
# above the default index's. No default: unset, torch comes from pip's configured index.
ARG TORCH_INDEX_URL=

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY api/ api/
COPY operator/ operator/
COPY workload/ workload/
# Installed as the README installs it: `pip install '.[workload]'`. DL3013 asks for pinned
# PyPI packages; this installs the local project, whose dependency ranges live in pyproject.toml.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir ${TORCH_INDEX_URL:+--extra-index-url "${TORCH_INDEX_URL}"} '.[workload]' \
    && rm -rf /src \
    && useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin distgnn

WORKDIR /home/distgnn
# A numeric user, so that the kubelet can check runAsNonRoot.
USER 10001:10001
CMD ["python", "-c", "import distgnn_workload; print('the operator sets the command: python -m distgnn_workload.<role>')"]
