"""Fixtures of the integration tier's operator tests."""

from __future__ import annotations

import pytest

from tests.operator.harness import install_crd
from tests.support.controlplane import ControlPlane


@pytest.fixture(scope="module")
def crd(control_plane: ControlPlane) -> None:
    """The DistGNNJob CRD, installed once per test module."""
    install_crd(control_plane)
