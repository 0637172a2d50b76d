"""The operator image, run the way the chart runs it, against the real control plane.

``helm install`` points ``image.repository``/``image.tag`` at the built image; the Deployment
must name it. Then the Deployment's command runs from the image's root filesystem (read-only,
uid 10001, shells masked, only the image's Python) with the Deployment's env and a token of the
chart's ServiceAccount, and a DistGNNJob goes Pending → Partitioning → Training → Succeeded
under kwok, as in tests/integration/test_chart_install.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from distgnn_operator.local.ports import free_ports
from tests.images.hygiene import assert_hygiene, process_ids
from tests.integration.test_chart_install import (
    OperatorProcess,
    Release,
    assert_phases,
    drive_job,
    installed,
)
from tests.support.controlplane import ControlPlane
from tests.support.image_run import IMAGE_UID, Bind, ImageRoot
from tests.support.process_group import process_group

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]

KUBECONFIG_INSIDE = "/etc/distgnn/kubeconfig"
OPERATOR_MAX_BYTES = 250_000_000  # MB as the build script prints them: 10^6 bytes


@pytest.fixture(scope="module")
def operator_root(unpacked: Callable[[str], ImageRoot]) -> ImageRoot:
    return unpacked("operator")


@contextmanager
def operator_from_image(
    image: ImageRoot, control_plane: ControlPlane, release: Release, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """The Deployment's container, from the image root, as the chart's ServiceAccount."""
    (container,) = release.one("Deployment")["spec"]["template"]["spec"]["containers"]
    token_config = control_plane.token_kubeconfig(release.namespace, release.service_account)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(token_config.read_bytes())
    os.chown(kubeconfig, IMAGE_UID, IMAGE_UID)  # a projected token is readable by the pod's user
    metrics_port, health_port = free_ports(2)
    env = release.operator_env()
    env.update(
        {
            "KUBECONFIG": KUBECONFIG_INSIDE,
            "DISTGNN_OPERATOR_KUBECONFIG": KUBECONFIG_INSIDE,
            "DISTGNN_OPERATOR_METRICS_PORT": str(metrics_port),
            "DISTGNN_OPERATOR_HEALTH_PORT": str(health_port),
            "DISTGNN_OPERATOR_PROGRESS_POLL_INTERVAL": "1",
            "DISTGNN_OPERATOR_LOG_LEVEL": "DEBUG",
        }
    )
    root = image.with_binds(Bind(kubeconfig, KUBECONFIG_INSIDE, read_only=True))
    log_path = tmp_path / "operator.log"
    command = root.command(container["command"])
    with process_group(command, root.environ(env), log_path) as process:
        yield OperatorProcess(process, log_path, metrics_port)


def test_operator_image_is_lean_and_non_root(operator_root: ImageRoot) -> None:
    assert_hygiene(operator_root)
    site = list(operator_root.root.glob("usr/local/lib/python3*/*-packages"))
    assert site, "no site-packages under /usr/local in the operator image"
    installed_names = {p.name.split("-")[0].lower() for s in site for p in s.iterdir()}
    assert "kopf" in installed_names
    assert not {"torch", "torch_geometric", "pymetis"} & installed_names, installed_names


def test_operator_image_is_under_250_mb(tmp_path: Path) -> None:
    from tests.images.conftest import build_image

    size = build_image("operator", tmp_path).unpacked_bytes
    assert size < OPERATOR_MAX_BYTES, f"the operator image unpacks to {size / 1e6:.1f} MB"


def test_operator_image_runs_a_job_as_the_chart_deploys_it(
    operator_root: ImageRoot, control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    from tests.images.conftest import build_image

    reference = build_image("operator", tmp_path).reference
    repository, tag = reference.rsplit(":", 1)
    values = {"image.repository": repository, "image.tag": tag}
    with installed(control_plane, tmp_path, namespace, values) as release:
        deployment = release.one("Deployment")
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == reference
        live = control_plane.get_json("deployment", deployment["metadata"]["name"], "-n", namespace)
        assert live["spec"]["template"]["spec"]["containers"][0]["image"] == reference
        # The chart's command is the image's own entrypoint.
        assert container["command"] == operator_root.entrypoint
        assert container["securityContext"]["readOnlyRootFilesystem"] is True

        with operator_from_image(operator_root, control_plane, release, tmp_path) as operator:
            uids = process_ids(operator.process.pid)
            assert uids == (IMAGE_UID, IMAGE_UID), f"the operator runs as uid/gid {uids}"
            phases = drive_job(control_plane, operator, namespace)
            assert not operator.forbidden_lines(), "\n".join(operator.forbidden_lines())
        assert_phases(phases)
