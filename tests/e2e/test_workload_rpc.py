"""Real torch RPC between two local processes: a sampler server's failure reaches the trainer.

torch RPC hands an exception that an ``async_execution`` function sets on its future to the
caller as a plain value; a trainer then used it as a mini-batch (``TypeError: 'RuntimeError'
object is not subscriptable``). Now the caller raises a ``RemoteError`` naming the sampler.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distgnn_operator.local.ports import free_ports
from tests.e2e.rpc_peers import sampler_and_trainer
from tests.support.ranks import spawn_ranks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_a_sampler_failure_is_raised_in_the_trainer_naming_the_sampler(tmp_path: Path) -> None:
    out = tmp_path / "trainer.txt"
    spawn_ranks(sampler_and_trainer, (free_ports(1)[0], str(out)), 2)
    text = out.read_text()
    assert "raw value: RemoteError" in text  # a value, which the caller must check
    assert "wait_remote: RemoteError: sampler-0 failed: IndexError: seed 7" in text
    assert "pipeline: RemoteError: sampler-0 failed: IndexError: seed 7" in text
    assert "TypeError" not in text
