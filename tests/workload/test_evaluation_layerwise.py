"""Layer-wise full-neighbourhood inference in one process equals the full-graph forward."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from distgnn_api.spec import EvaluationKind, EvaluationSpec
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE
from distgnn_workload.evaluation import (
    LayerwiseInference,
    final_accuracies,
    full_neighbourhood_accuracy,
    node_shares,
)
from distgnn_workload.evaluation.blocks import build_block, chunk_bounds, in_degrees
from distgnn_workload.evaluation.store_rows import StoreRows
from distgnn_workload.partition import PartitionStore
from tests.support.layerwise import ARCHS, full_graph_logits, model_of, write_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> PartitionStore:
    return write_store(tmp_path_factory.mktemp("layerwise") / "store", 3)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("num_layers", [1, 3])
def test_layerwise_equals_the_full_graph_forward(
    store: PartitionStore, arch: str, num_layers: int
) -> None:
    model = model_of(arch, num_layers)
    want = full_graph_logits(model, store)
    # small chunks: many blocks per layer, each with neighbours outside it
    engine = LayerwiseInference.of_store(store, chunk_edges=97, chunk_nodes=40)
    assert len(engine.chunks(NODE_TYPE, [EDGE_TYPE])) > 5
    got = engine.logits(model)
    assert got.shape == (store.meta.num_nodes, 5)
    assert float(want.abs().max()) > 0.1  # the comparison is not between zeros
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_layerwise_leaves_training_mode_as_it_found_it(store: PartitionStore, arch: str) -> None:
    model = model_of(arch).train()
    want = full_graph_logits(model.eval(), store)
    got = LayerwiseInference.of_store(store).logits(model.train())  # dropout must not apply
    assert model.training
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_accuracy_counts_each_split_over_its_nodes(store: PartitionStore) -> None:
    model = model_of("sage")
    logits = full_graph_logits(model, store)
    graph = store.to_graph()
    hit = logits.argmax(-1).numpy() == np.asarray(graph.y)
    got = full_neighbourhood_accuracy(
        LayerwiseInference.of_store(store, chunk_edges=200),
        model,
        StoreRows(store),
        ["val", "test"],
        lambda v: v,
    )
    assert got["val"] == pytest.approx(hit[np.asarray(graph.val_mask)].mean())
    assert got["test"] == pytest.approx(hit[np.asarray(graph.test_mask)].mean())


def test_blocks_hold_whole_in_neighbourhoods_destinations_first(store: PartitionStore) -> None:
    indptr, indices = store.topology()
    degree = in_degrees(indptr, torch.device("cpu"))
    bounds = chunk_bounds(indptr, 10, 200, max_edges=50, max_nodes=30)
    assert bounds[0][0] == 10
    assert bounds[-1][1] == 200
    assert all(a < b and b == c for (a, b), (c, _) in itertools.pairwise(bounds))
    for a, b in bounds:
        edges = int(indptr[b] - indptr[a])
        assert b - a <= 30
        assert edges <= 50 or b - a == 1
        block = build_block(indptr, indices, a, b, degree, torch.device("cpu"))
        assert block.nodes[: block.num_dst].tolist() == list(range(a, b))
        assert len(set(block.nodes.tolist())) == block.num_src
        for i in range(block.num_dst):
            got = block.nodes[block.src[block.ptr[i] : block.ptr[i + 1]]].tolist()
            assert got == np.asarray(indices[indptr[a + i] : indptr[a + i + 1]]).tolist()
        assert block.degree.tolist() == [
            int(indptr[v + 1] - indptr[v]) for v in block.nodes.tolist()
        ]


def test_shares_cover_every_node_once() -> None:
    assert node_shares([0, 4, 9, 12, 20], 2) == [(0, 9), (9, 20)]  # whole partitions
    assert node_shares([0, 4, 9, 20], 2) == [(0, 10), (10, 20)]  # 3 partitions: even split
    assert node_shares([0, 5], 1) == [(0, 5)]
    with pytest.raises(ValueError, match="share"):
        node_shares([0, 1], 2)


def test_final_accuracies_take_each_figure_of_the_kind_the_spec_names() -> None:
    asked: list[list[str]] = []

    def full(splits: object) -> dict[str, float | None]:
        asked.append(list(splits))  # type: ignore[call-overload]
        return {"val": 0.9, "test": 0.8}

    sampled = {"val": 0.7, "test": 0.6}.__getitem__
    got = final_accuracies(EvaluationSpec(), sampled=sampled, full=full, has_val=True, last_val=0.5)
    assert (got.test, got.test_kind, got.val, got.val_kind) == (
        0.8,
        EvaluationKind.full,
        0.7,
        EvaluationKind.sampled,
    )
    assert asked == [["test"]]
    spec = EvaluationSpec(test=EvaluationKind.full, validation=EvaluationKind.full)
    got = final_accuracies(spec, sampled=sampled, full=full, has_val=True, last_val=None)
    assert (got.val, got.val_kind) == (0.9, EvaluationKind.full)
    assert asked[-1] == ["val", "test"]  # one pass for both
    spec = EvaluationSpec(test=EvaluationKind.sampled)
    got = final_accuracies(spec, sampled=sampled, full=full, has_val=False, last_val=None)
    assert (got.test, got.test_kind, got.val, got.val_kind) == (
        0.6,
        EvaluationKind.sampled,
        None,
        None,
    )
    assert len(asked) == 2


def test_the_store_is_read_from_disk(tmp_path: Path) -> None:
    """Changing a feature on disk changes the layer-wise logits: layer 0 reads the store."""
    store = write_store(tmp_path / "s", 2)
    model = model_of("sage", 1)
    before = LayerwiseInference.of_store(store).logits(model)
    features = np.load(tmp_path / "s" / "part-0" / "features.npy", mmap_mode="r+")
    features[0] += 5.0
    features.flush()
    after = LayerwiseInference.of_store(PartitionStore.open(tmp_path / "s")).logits(model)
    assert not torch.allclose(before[0], after[0])
    torch.testing.assert_close(after, full_graph_logits(model, PartitionStore.open(tmp_path / "s")))
