"""Distributed layer-wise inference: two real processes (gloo) over a real partition store
give the logits and accuracies of a single-process full-graph forward of the same weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.layerwise_peers import check_two_ranks

pytestmark = pytest.mark.slow


def test_two_processes_equal_the_single_process_full_graph_forward(tmp_path: Path) -> None:
    differences = check_two_ranks(tmp_path)
    print("largest absolute logit difference:", differences)
