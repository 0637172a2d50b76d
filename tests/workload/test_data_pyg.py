"""The PyG loader: a Data object (or a dict of tensors) saved with torch.save."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distgnn_workload.data import DatasetError
from distgnn_workload.data.csr import edge_pairs
from distgnn_workload.data.pyg import load_pyg

torch = pytest.importorskip("torch")
pyg_data = pytest.importorskip("torch_geometric.data")

N = 6


def _fields() -> dict[str, Any]:
    return {
        "x": torch.arange(N * 3, dtype=torch.float32).reshape(N, 3),
        "y": torch.tensor([0, 1, 2, 0, 1, 2]),
        "edge_index": torch.tensor([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 5, 0]]),
        "train_mask": torch.tensor([True, True, True, False, False, False]),
        "val_mask": torch.tensor([False, False, False, True, False, False]),
        "test_mask": torch.tensor([False, False, False, False, True, True]),
    }


def _save(tmp_path: Path, obj: Any) -> Path:
    path = tmp_path / "graph.pt"
    torch.save(obj, path)
    return path


def test_data_object_round_trip(tmp_path: Path) -> None:
    fields = _fields()
    g = load_pyg(_save(tmp_path, pyg_data.Data(**fields)))
    assert np.array_equal(g.x, fields["x"].numpy())
    assert np.array_equal(g.y, fields["y"].numpy())
    assert g.num_classes == 3
    assert np.array_equal(g.train_mask, fields["train_mask"].numpy())
    assert g.info["self_loops_dropped"] == 1
    pairs = {tuple(p) for p in edge_pairs(g.indptr, g.indices).tolist()}
    undirected = {(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)}
    assert pairs == undirected | {(b, a) for a, b in undirected}


def test_dict_with_index_splits_and_column_labels(tmp_path: Path) -> None:
    fields = _fields()
    fields["y"] = fields["y"].unsqueeze(1)
    fields["train_mask"] = torch.tensor([0, 1, 2])
    fields["valid_mask"] = fields.pop("val_mask")
    fields["num_classes"] = 5
    g = load_pyg(_save(tmp_path, fields))
    assert g.num_classes == 5
    assert np.flatnonzero(g.train_mask).tolist() == [0, 1, 2]
    assert np.flatnonzero(g.val_mask).tolist() == [3]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"train_mask": None}, r"lacks train_mask; it needs x, y, edge_index"),
        ({"x": torch.zeros(N)}, r"x must be a float tensor \[N, F\]"),
        ({"y": torch.tensor([0, 1, 2])}, r"y must be an integer tensor \[6\]"),
        ({"y": torch.tensor([0, 1, -1, 0, 1, 2])}, r"y\[2\] = -1 is negative"),
        ({"y": torch.tensor([0.0, 1, 2, 0, 1, 2])}, r"y must be an integer tensor"),
        (
            {"edge_index": torch.tensor([[0, 1], [1, 6]])},
            r"edge_index\[:, 1\] = \(1, 6\) refers to a node outside \[0, 6\)",
        ),
        ({"edge_index": torch.tensor([0, 1, 2])}, r"edge_index must be an integer tensor \[2, E\]"),
        ({"test_mask": torch.tensor([True, False])}, r"test_mask must be a bool tensor \[6\]"),
        (
            {"val_mask": torch.tensor([7])},
            r"val_mask as an index vector must hold node ids in \[0, 6\)",
        ),
        ({"num_classes": 2}, r"y\[2\] = 2 is out of range for num_classes=2"),
    ],
)
def test_invalid_fields_are_named(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    fields = {**_fields(), **change}
    fields = {k: v for k, v in fields.items() if v is not None}
    with pytest.raises(DatasetError, match=message):
        load_pyg(_save(tmp_path, fields))


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"missing.pt: not found; dataset.pyg.path"):
        load_pyg(tmp_path / "missing.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a torch file")
    with pytest.raises(DatasetError, match=r"bad.pt: cannot be loaded with torch.load"):
        load_pyg(bad)
