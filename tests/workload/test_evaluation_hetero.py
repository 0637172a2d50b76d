"""Typed layer-wise (full-neighbourhood) inference of R-SAGE and R-GCN.

Its logits equal the full-graph forward of the same weights: our relational model over the
whole typed graph as one batch, and PyG's ``to_hetero(GraphSAGE)`` over the whole
``HeteroData`` for R-SAGE; in one process with small chunks, and over two real processes
(gloo) whose featureless types' rows are sharded learnt embeddings, looked up collectively.
The accuracy counts and the typed store's feature ranges are checked against plain sums.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import Tensor
from torch_geometric.data import HeteroData
from torch_geometric.nn import GraphSAGE, to_hetero

from distgnn_api.spec import PartitionAlgorithm, PartitionSpec
from distgnn_operator.local.ports import free_ports
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.evaluation import (
    HeldSplits,
    LayerwiseInference,
    full_neighbourhood_accuracy,
    typed_shares,
)
from distgnn_workload.evaluation.store_rows import typed_feature_range
from distgnn_workload.partition.store import HeteroPartitionStore
from distgnn_workload.partition.writer import write_partitions
from tests.support import hetero_layerwise as hl
from tests.support.ranks import spawn_ranks
from tests.workload.hetero_graphs import NUM_NODES


def _engine(
    x: dict[str, Tensor], chunk_edges: int = 1 << 21, chunk_nodes: int = 1 << 16
) -> LayerwiseInference:
    return LayerwiseInference(
        hl.graph(),
        NUM_NODES,
        lambda t, lo, hi: x[t][lo:hi],
        chunk_edges=chunk_edges,
        chunk_nodes=chunk_nodes,
    )


def _full_forward(arch: str, num_layers: int, x: dict[str, Tensor]) -> Tensor:
    model = hl.model_of(arch, num_layers)
    with torch.no_grad():
        logits: Tensor = model(x, hl.full_graph_batch(hl.graph(), num_layers))
    return logits


@pytest.mark.parametrize("arch", hl.ARCHS)
@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_layerwise_logits_equal_the_full_graph_forward(arch: str, num_layers: int) -> None:
    x = hl.inputs()
    want = _full_forward(arch, num_layers, x)
    assert want.shape == (NUM_NODES["paper"], hl.CLASSES)
    assert float(want.abs().max()) > 0.1
    # one chunk per type, then many small ones: the same logits
    for edges, nodes in ((1 << 21, 1 << 16), (31, 7)):
        got = _engine(x, edges, nodes).logits(hl.model_of(arch, num_layers))
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_rsage_layerwise_logits_equal_to_hetero_graphsage_on_the_whole_heterodata() -> None:
    num_layers = 2
    x = hl.inputs()
    data = HeteroData()
    for t, rows in x.items():
        data[t].x = rows
    for et, (indptr, indices) in hl.graph().items():
        dst = torch.repeat_interleave(torch.arange(NUM_NODES[et[2]]), indptr[1:] - indptr[:-1])
        data[et].edge_index = torch.stack([indices.to(torch.int64), dst])
    torch.manual_seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gnn = GraphSAGE((-1, -1), hl.HIDDEN, num_layers, out_channels=hl.CLASSES)
        ref = to_hetero(gnn, data.metadata(), aggr="sum").eval()
    with torch.no_grad():
        ref(data.x_dict, data.edge_index_dict)  # initialise the lazy weights
        want = ref(data.x_dict, data.edge_index_dict)["paper"]
    ours = hl.model_of("rsage", num_layers)
    state = ref.state_dict()
    missing, _ = ours.load_state_dict(
        {k: v for k, v in state.items() if k in ours.state_dict()}, strict=False
    )
    assert not missing
    got = _engine(x, chunk_edges=64).logits(ours)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_typed_shares_cover_every_id_once_even_with_more_ranks_than_nodes() -> None:
    assert typed_shares(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert typed_shares(2, 4) == [(0, 0), (0, 1), (1, 1), (1, 2)]
    with pytest.raises(ValueError, match="world_size"):
        typed_shares(5, 0)


def test_accuracy_counts_the_split_nodes_of_each_share() -> None:
    x = hl.inputs()
    model = hl.model_of("rgcn", 2)
    logits = _full_forward("rgcn", 2, x)
    predicted = logits.argmax(-1)
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, hl.CLASSES, (NUM_NODES["paper"],), generator=g)
    labels[:40] = predicted[:40]  # some right for sure
    splits = {
        "val": torch.arange(0, 300, 3),
        "test": torch.arange(1, 120, 2),
        "none": torch.zeros(0, dtype=torch.int64),
    }
    figures = full_neighbourhood_accuracy(
        _engine(x), model, HeldSplits(labels, splits), ["val", "test", "none"], lambda v: v
    )
    for split in ("val", "test"):
        ids = splits[split]
        assert figures[split] == pytest.approx(
            float((predicted[ids] == labels[ids]).float().mean())
        )
    assert figures["none"] is None


@pytest.mark.slow
def test_two_processes_with_sharded_embeddings_equal_the_full_graph_forward(
    tmp_path: Path,
) -> None:
    world, num_layers = 3, 2  # an uneven split of every type
    spawn_ranks(hl.evaluate_rank, (world, free_ports(1)[0], str(tmp_path), num_layers), world)
    x = hl.inputs()
    for arch in hl.ARCHS:
        got = [torch.load(tmp_path / f"{arch}-{r}.pt") for r in range(world)]
        assert [g["share"] for g in got] == typed_shares(NUM_NODES["paper"], world)
        logits = torch.cat([g["logits"] for g in got])
        torch.testing.assert_close(logits, _full_forward(arch, num_layers, x), rtol=1e-5, atol=1e-5)


def test_typed_feature_ranges_read_the_rows_of_every_partition(tmp_path: Path) -> None:
    graph = generate_mag(SyntheticHeteroConfig(scale=0.001, num_classes=4, seed=2))
    spec = PartitionSpec(algorithm=PartitionAlgorithm.random)
    write_partitions(tmp_path / "store", graph, 3, spec=spec, key="k")
    store = HeteroPartitionStore.open(tmp_path / "store")
    whole = np.asarray(graph.x["paper"], dtype=np.float32)
    n = whole.shape[0]
    for lo, hi in ((0, n), (5, 17), (n - 3, n), (4, 4)):
        np.testing.assert_array_equal(typed_feature_range(store, "paper", lo, hi), whole[lo:hi])
    with pytest.raises(ValueError, match="author"):
        typed_feature_range(store, "author", 0, 1)
