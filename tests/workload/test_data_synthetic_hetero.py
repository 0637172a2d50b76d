"""The MAG-shaped synthetic graph: ogbn-mag's table, exact sizes, determinism, learnability."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data import DatasetError
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag

WRITES: EdgeType = ("author", "writes", "paper")
REV_WRITES: EdgeType = ("paper", "rev_writes", "author")
CITES: EdgeType = ("paper", "cites", "paper")
HAS_TOPIC: EdgeType = ("paper", "has_topic", "field_of_study")
REV_HAS_TOPIC: EdgeType = ("field_of_study", "rev_has_topic", "paper")
AFFILIATED: EdgeType = ("author", "affiliated_with", "institution")


def test_full_scale_shape_is_ogbn_mag() -> None:
    cfg = SyntheticHeteroConfig()
    assert cfg.node_counts() == {
        "paper": 736_389,
        "author": 1_134_649,
        "institution": 8_740,
        "field_of_study": 59_965,
    }
    assert cfg.edge_counts() == {
        AFFILIATED: 1_043_998,
        WRITES: 7_145_660,
        CITES: 5_416_271,
        HAS_TOPIC: 7_505_078,
    }
    assert (cfg.num_classes, cfg.num_features) == (349, 128)


def test_small_scale_sizes_reverse_relations_and_splits() -> None:
    cfg = SyntheticHeteroConfig(scale=0.003, seed=3)
    g = generate_mag(cfg)
    g.validate(deep=True)
    counts = cfg.node_counts()
    assert g.node_counts == counts
    assert counts["paper"] == round(736_389 * 0.003)
    assert g.edge_types == [  # PyG's OGB_MAG order, then ToUndirected's reverses
        AFFILIATED,
        WRITES,
        CITES,
        HAS_TOPIC,
        ("institution", "rev_affiliated_with", "author"),
        REV_WRITES,
        REV_HAS_TOPIC,
    ]
    for et, m in cfg.edge_counts().items():
        # Exactly the table's edges per relation, each stored once, cites in both directions.
        assert g.num_edges(et) == (2 * m if et == CITES else m), et
    assert g.num_edges(REV_WRITES) == g.num_edges(WRITES)
    assert g.info["duplicate_edges_dropped"][("paper__cites__paper")] == 0
    assert g.info["self_loops"] == {"paper__cites__paper": 0}
    assert all(g.in_csr[et][1].dtype == np.int32 for et in g.edge_types)
    assert list(g.x) == ["paper"]
    assert g.x["paper"].shape == (counts["paper"], 128)
    assert g.featureless_types == ["author", "institution", "field_of_study"]
    assert g.num_classes == 349
    assert g.y.min() >= 0
    assert g.y.max() < 349
    n = counts["paper"]
    assert g.train_mask.sum() == round(629_571 / 736_389 * n)
    assert g.val_mask.sum() == round(64_879 / 736_389 * n)
    assert (g.train_mask | g.val_mask | g.test_mask).all()
    assert not (g.train_mask & g.test_mask).any()


def test_without_reverse_relations() -> None:
    g = generate_mag(SyntheticHeteroConfig(scale=0.002, add_reverse=False))
    assert g.edge_types == [AFFILIATED, WRITES, CITES, HAS_TOPIC]
    assert g.num_edges(CITES) == SyntheticHeteroConfig(scale=0.002).edge_counts()[CITES]


def _arrays(g: HeteroGraphData) -> list[npt.NDArray[Any]]:
    out: list[npt.NDArray[Any]] = [g.x["paper"], g.y, g.train_mask, g.test_mask]
    for et in g.edge_types:
        out += list(g.in_csr[et])
    return out


def test_deterministic_by_seed() -> None:
    a = generate_mag(SyntheticHeteroConfig(scale=0.002, seed=5))
    b = generate_mag(SyntheticHeteroConfig(scale=0.002, seed=5))
    c = generate_mag(SyntheticHeteroConfig(scale=0.002, seed=6))
    assert all(np.array_equal(p, q) for p, q in zip(_arrays(a), _arrays(b), strict=True))
    assert not np.array_equal(a.in_csr[CITES][1], c.in_csr[CITES][1])
    assert not np.array_equal(a.y, c.y)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (SyntheticHeteroConfig(scale=0), r"scale must be positive"),
        (SyntheticHeteroConfig(scale=1e-6), r"too few nodes for .* edges; raise scale"),
        (SyntheticHeteroConfig(scale=0.01, num_classes=1), r"numClasses must be at least 2"),
        (SyntheticHeteroConfig(scale=0.01, label_noise=1.0), r"labelNoise must lie in \[0, 1\)"),
    ],
)
def test_bad_config(config: SyntheticHeteroConfig, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        generate_mag(config)


def _mean(g: HeteroGraphData, et: EdgeType, h: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Mean of ``h`` over each destination's in-neighbours of ``et`` (0 where there are none)."""
    indptr, indices = g.in_csr[et]
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    out = np.zeros((len(indptr) - 1, h.shape[1]))
    np.add.at(out, dst, h[indices])
    return out / np.maximum(np.diff(indptr), 1)[:, None]


def _ridge_accuracy(g: HeteroGraphData, x: npt.NDArray[np.float64]) -> float:
    x = np.hstack([x, np.ones((len(x), 1))])
    targets = np.eye(g.num_classes)[g.y]
    tr = g.train_mask
    w = np.linalg.solve(x[tr].T @ x[tr] + np.eye(x.shape[1]), x[tr].T @ targets[tr])
    return float(((x @ w).argmax(1) == g.y)[g.test_mask].mean())


def _majority_share(g: HeteroGraphData) -> float:
    return float(np.bincount(g.y[g.test_mask]).max() / g.test_mask.sum())


def test_relations_carry_the_signal_but_labels_stay_hard() -> None:
    # A linear model on metapath means (SIGN style: cites, paper-author-paper,
    # paper-topic-paper) against the paper's features alone.
    g = generate_mag(SyntheticHeteroConfig(scale=0.02, num_classes=20, seed=1))
    x = g.x["paper"].astype(np.float64)
    cites = _mean(g, CITES, x)
    pap = _mean(g, WRITES, _mean(g, REV_WRITES, x))
    ptp = _mean(g, REV_HAS_TOPIC, _mean(g, HAS_TOPIC, x))
    features_only = _ridge_accuracy(g, x)
    relational = _ridge_accuracy(g, np.hstack([x, cites, pap, ptp]))
    assert relational > features_only + 0.1, (features_only, relational)
    assert relational > 3 * _majority_share(g), relational
    # A fifth of the labels (label_noise 0.4, half the group) cannot be recovered.
    assert relational < 0.75, relational


def test_rsage_learns_well_above_chance_and_below_perfect() -> None:
    # A plain PyG to_hetero-style R-SAGE (HeteroConv of SAGEConv), full batch, embeddings
    # for the featureless types.
    torch = pytest.importorskip("torch")
    nn = pytest.importorskip("torch_geometric.nn")
    from distgnn_workload.data.pyg_hetero import to_pyg_hetero

    g = generate_mag(SyntheticHeteroConfig(scale=0.003, num_classes=10, seed=2))
    data = to_pyg_hetero(g)
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    hidden = 32
    emb = torch.nn.ModuleDict(
        {t: torch.nn.Embedding(g.node_counts[t], hidden) for t in g.featureless_types}
    )
    lin = torch.nn.Linear(g.num_features("paper"), hidden)
    conv1 = nn.HeteroConv({et: nn.SAGEConv(hidden, hidden) for et in g.edge_types}, aggr="sum")
    to_paper = [et for et in g.edge_types if et[2] == "paper"]
    with warnings.catch_warnings():  # the last layer updates papers only, on purpose
        warnings.filterwarnings("ignore", "There exist node types", UserWarning)
        conv2 = nn.HeteroConv(
            {et: nn.SAGEConv(hidden, g.num_classes) for et in to_paper}, aggr="sum"
        )
    model = torch.nn.ModuleList([emb, lin, conv1, conv2])

    def forward(train: bool) -> Any:
        h = {t: e.weight for t, e in emb.items()} | {"paper": lin(data["paper"].x)}
        h = {
            t: torch.nn.functional.dropout(v.relu(), 0.5, train)
            for t, v in conv1(h, data.edge_index_dict).items()
        }
        return conv2(h, data.edge_index_dict)["paper"]

    y, train = data["paper"].y, data["paper"].train_mask
    test = data["paper"].test_mask
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    try:
        for _ in range(25):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(forward(True)[train], y[train]).backward()
            opt.step()
        with torch.no_grad():
            accuracy = (forward(False).argmax(1)[test] == y[test]).float().mean().item()
    finally:
        torch.set_num_threads(threads)
    features_only = _ridge_accuracy(g, g.x["paper"].astype(np.float64))
    assert accuracy > 2.5 * _majority_share(g), accuracy
    assert accuracy > features_only + 0.05, (features_only, accuracy)
    assert accuracy < 0.8, accuracy
