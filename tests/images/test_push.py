"""``hack/build-images.sh --push`` against a real OCI registry on loopback (Debian's
docker-registry, plain HTTP): the operator image goes to ``localhost:<port>/distgnn`` without a
rebuild, comes back through skopeo with the archive's digests, and the chart pointed at that
registry names the pushed image. Only the operator image: the cheapest one to push."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.chart.helm import Helm
from tests.images.conftest import BUILD_SCRIPT, REPO_ROOT, build_image
from tests.support.controlplane_binaries import ensure_binaries
from tests.support.oci_image import OciArchive
from tests.support.registry import (
    Registry,
    RegistryUnavailable,
    registry_binary,
    running_registry,
)

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    if os.geteuid() != 0:
        pytest.skip("pushing needs the built image, and building needs root (buildah)")
    try:
        binary = registry_binary()
    except RegistryUnavailable as err:
        pytest.skip(f"no registry to push to: Debian's docker-registry cannot be fetched ({err})")
    with running_registry(binary, tmp_path_factory.mktemp("registry")) as served:
        yield served


def script(*args: str, registry: Registry) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DISTGNN_REGISTRY": f"{registry.host}/distgnn",
        "DISTGNN_PUSH_TLS_VERIFY": "false",
    }
    return subprocess.run(
        ["bash", str(BUILD_SCRIPT), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def skopeo(*args: str) -> str:
    result = subprocess.run(
        ["skopeo", *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, (
        f"skopeo {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
    )
    return result.stdout


def test_push_copies_the_built_operator_image_to_a_registry(
    registry: Registry, tmp_path: Path
) -> None:
    archive = build_image("operator", tmp_path)  # built (or current) under its own name first
    references = dict(
        line.split() for line in script("--print-references", registry=registry).stdout.splitlines()
    )
    reference = references["operator"]
    assert reference.startswith(f"{registry.host}/distgnn/operator:"), reference

    pushed = script("--push", "operator", registry=registry)
    assert pushed.returncode == 0, f"--push exited {pushed.returncode}:\n{pushed.stderr[-4000:]}"
    # Another registry is not another image: the archive is pushed, not rebuilt.
    assert "operator: unchanged" in pushed.stderr, pushed.stderr[-4000:]
    assert f"pushed {reference}@{archive.manifest_digest}" in pushed.stderr, pushed.stderr[-4000:]
    (row,) = [line for line in pushed.stdout.splitlines() if line.startswith("operator ")]
    assert row.split()[1] == reference

    # The registry serves it under that tag, by the archive's manifest digest.
    inspected = json.loads(skopeo("inspect", "--tls-verify=false", f"docker://{reference}"))
    assert inspected["Digest"] == archive.manifest_digest
    # Pulled back: the same manifest, config and layers.
    pulled = OciArchive(tmp_path / "pulled.oci.tar")
    skopeo(
        "copy", "--quiet", "--src-tls-verify=false",
        f"docker://{reference}", f"oci-archive:{pulled.path}:{reference}",
    )  # fmt: skip
    assert pulled.reference == reference
    assert pulled.manifest_digest == archive.manifest_digest
    assert pulled.blob_digests == archive.blob_digests
    assert pulled.config == archive.config


def test_the_chart_names_the_pushed_image_when_pointed_at_the_registry(
    registry: Registry, tmp_path: Path
) -> None:
    archive = build_image("operator", tmp_path)
    pushed = script("--push", "operator", registry=registry)
    assert pushed.returncode == 0, f"--push exited {pushed.returncode}:\n{pushed.stderr[-4000:]}"
    repository = f"{registry.host}/distgnn/operator"
    helm = Helm(ensure_binaries() / "helm", tmp_path / "helm")
    # Only the repository: the chart's default tag (its appVersion) is the script's tag.
    rendered = helm.template("distgnn", "distgnn-system", {"image.repository": repository})
    (deployment,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    image = container["image"]
    assert image.startswith(f"{repository}:"), image
    # What the Deployment names is what the registry holds: the pushed image.
    inspected = json.loads(skopeo("inspect", "--tls-verify=false", f"docker://{image}"))
    assert inspected["Digest"] == archive.manifest_digest, (image, inspected["Digest"])
