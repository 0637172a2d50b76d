"""Fixtures of the integration tier's operator tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.operator.harness import install_crd
from tests.support import kueue
from tests.support.controlplane import ControlPlane
from tests.support.kueue_queues import Queues


@pytest.fixture(scope="module")
def crd(control_plane: ControlPlane) -> None:
    """The DistGNNJob CRD, installed once per test module."""
    install_crd(control_plane)


@pytest.fixture(scope="module")
def kueue_manager(control_plane: ControlPlane) -> Iterator[kueue.Kueue]:
    """The real Kueue controller manager, started once per test module that asks for it."""
    install_crd(control_plane)
    manager = kueue.start(control_plane)
    try:
        yield manager
    finally:
        manager.stop(control_plane)


@pytest.fixture
def queues(
    control_plane: ControlPlane, namespace: str, kueue_manager: kueue.Kueue
) -> Iterator[Queues]:
    """One test's flavors and queues (its setup() makes them), deleted after the test."""
    made = Queues(control_plane, namespace)
    try:
        yield made
    finally:
        made.cleanup()
