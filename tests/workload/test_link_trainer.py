"""The link trainer in one process: it learns links, and reports MRR and Hits@K."""

from __future__ import annotations

from pathlib import Path

import pytest

from distgnn_api.contract import Result
from tests.support.link_graph import community_graph, link_spec, train_in_process, write_link_store

# MRR of random scores against 50 negatives: the mean of 1/r over r = 1..51
RANDOM_MRR = sum(1 / r for r in range(1, 52)) / 51


@pytest.mark.slow
@pytest.mark.parametrize(("decoder", "kind"), [("dot", "uniform"), ("mlp", "corruptDestination")])
def test_link_trainer_learns_and_reports_ranking(tmp_path: Path, decoder: str, kind: str) -> None:
    graph = community_graph()
    store = write_link_store(tmp_path / "store", graph)
    spec = link_spec(decoder=decoder, negatives={"perPositive": 2, "kind": kind})
    trainer = train_in_process(spec, graph, store, tmp_path / "run")
    result: Result = trainer.result  # type: ignore[attr-defined]
    assert result.test_accuracy is None
    assert result.test_link is not None
    assert result.val_link is not None
    print(decoder, kind, result.test_link.summary(), "random MRR", RANDOM_MRR)
    assert result.test_link.positives == graph.test[0].numel()
    assert set(result.test_link.hits) == {"1", "10", "50"}
    assert result.test_link.mrr > 2 * RANDOM_MRR
    losses = [h["loss"] for h in trainer.state.history]
    assert losses[-1] < losses[0]


def test_fixed_shape_steps_and_a_bounded_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DISTGNN_CUDA_GRAPH=static`` runs the link step a GPU captures (eagerly on CPU),
    and ``positivesPerEpoch`` trains each epoch on exactly that many positives."""
    from distgnn_workload.trainer.link_graph_step import LinkGraphStep
    from distgnn_workload.trainer.step_policy import ENV_CUDA_GRAPH

    monkeypatch.setenv(ENV_CUDA_GRAPH, "static")
    graph = community_graph()
    store = write_link_store(tmp_path / "store", graph)
    spec = link_spec(negatives={"perPositive": 2, "kind": "uniform"}, positivesPerEpoch=500)
    trainer = train_in_process(spec, graph, store, tmp_path / "run")
    assert isinstance(trainer.graph_step, LinkGraphStep)
    assert trainer.graph_step.steps == spec.training.epochs * 8  # ceil(500 / 64) a epoch
    assert [h["seeds"] for h in trainer.state.history] == [500 * 6] * spec.training.epochs
    result: Result = trainer.result  # type: ignore[attr-defined]
    assert result.test_link is not None
    assert result.test_link.mrr > 2 * RANDOM_MRR
