"""The in-memory heterogeneous graph every hetero dataset loads into, and its builder.

A :class:`HeteroGraphData` holds, per node type, a node count and (where the type has them)
float32 features; per edge type ``(src, rel, dst)`` a destination-indexed CSR: row ``d`` of
``in_csr[et]`` lists the ``src`` nodes whose messages reach ``dst`` node ``d`` over ``et``,
sorted, without duplicates. Labels and train/val/test masks belong to the target node type.
All arrays are numpy; nothing here imports torch.

The builder turns edge lists into those CSRs through :mod:`distgnn_workload.data.hetero_csr`,
which adds reverse relations as PyG's ``ToUndirected`` does: a relation within one type is made
undirected in place; a relation between two types gets a ``rev_<rel>`` relation that carries its
messages back (see :mod:`distgnn_api.edge_types`). Duplicate edges are dropped and counted;
self-loops are kept, as ``ToUndirected`` keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType, is_type_name, reverse_edge_type
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.hetero_csr import CSR as CSR
from distgnn_workload.data.hetero_csr import EdgeList, relation_key
from distgnn_workload.data.hetero_csr import hetero_csr_from_edges as hetero_csr_from_edges
from distgnn_workload.data.hetero_csr import sort_unique_keys as sort_unique_keys


@dataclass
class HeteroGraphData:
    """A heterogeneous graph with typed features, and labels and splits on one node type.

    ``y`` holds one class per node of ``target_node_type``, -1 where a node has none; the
    masks select nodes of that type, and only labelled ones. ``x`` has an entry only for the
    types that have features (the others get learnable embeddings).
    """

    node_counts: dict[str, int]
    in_csr: dict[EdgeType, CSR]
    x: dict[str, npt.NDArray[np.float32]]
    target_node_type: str
    y: npt.NDArray[np.int64]
    train_mask: npt.NDArray[np.bool_]
    val_mask: npt.NDArray[np.bool_]
    test_mask: npt.NDArray[np.bool_]
    num_classes: int
    name: str = "hetero"
    info: dict[str, Any] = field(default_factory=dict)
    """Facts about how the graph was made (e.g. dropped duplicate edges), kept in META.json."""

    @classmethod
    def from_edges(
        cls,
        node_counts: Mapping[str, int],
        edges: Mapping[EdgeType, EdgeList],
        x: Mapping[str, npt.ArrayLike],
        target_node_type: str,
        y: npt.ArrayLike,
        train_mask: npt.ArrayLike,
        val_mask: npt.ArrayLike,
        test_mask: npt.ArrayLike,
        *,
        num_classes: int | None = None,
        add_reverse: bool = True,
        name: str = "hetero",
    ) -> HeteroGraphData:
        """A graph from per-relation edge lists (reverse relations added unless told not to)."""
        counts = {t: int(n) for t, n in node_counts.items()}
        in_csr, info = hetero_csr_from_edges(edges, counts, add_reverse=add_reverse)
        ya = np.asarray(y, dtype=np.int64)
        graph = cls(
            node_counts=counts,
            in_csr=in_csr,
            x=_features(x, counts),
            target_node_type=target_node_type,
            y=ya,
            train_mask=_bool_mask(train_mask, len(ya)),
            val_mask=_bool_mask(val_mask, len(ya)),
            test_mask=_bool_mask(test_mask, len(ya)),
            num_classes=int(num_classes if num_classes is not None else ya.max(initial=-1) + 1),
            name=name,
            info=info,
        )
        graph.validate()
        return graph

    @property
    def node_types(self) -> list[str]:
        return list(self.node_counts)

    @property
    def edge_types(self) -> list[EdgeType]:
        return list(self.in_csr)

    @property
    def num_target_nodes(self) -> int:
        return self.node_counts[self.target_node_type]

    def num_edges(self, edge_type: EdgeType | None = None) -> int:
        """Stored edges of one edge type, or of all of them (reverse relations included)."""
        if edge_type is not None:
            return len(self.in_csr[edge_type][1])
        return sum(len(indices) for _, indices in self.in_csr.values())

    def num_features(self, node_type: str) -> int:
        """Feature width of ``node_type``; 0 for a featureless type."""
        feats = self.x.get(node_type)
        return 0 if feats is None else int(feats.shape[1])

    @property
    def featureless_types(self) -> list[str]:
        return [t for t in self.node_counts if t not in self.x]

    def in_degrees(self, edge_type: EdgeType) -> npt.NDArray[np.int64]:
        return np.diff(self.in_csr[edge_type][0])

    def edge_index(self, edge_type: EdgeType) -> npt.NDArray[np.int64]:
        """The edges of one type as a [2, E] array of (src, dst) ids, PyG's layout."""
        indptr, indices = self.in_csr[edge_type]
        dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        return np.stack([indices.astype(np.int64), dst])

    def nbytes(self) -> int:
        total = sum(p.nbytes + i.nbytes for p, i in self.in_csr.values())
        total += sum(v.nbytes for v in self.x.values())
        masks = (self.train_mask, self.val_mask, self.test_mask)
        return total + self.y.nbytes + sum(m.nbytes for m in masks)

    def validate(self, *, deep: bool = False) -> None:
        """Check types, shapes, dtypes and ranges; ``deep`` also checks row order (slow)."""
        where = f"graph {self.name!r}"

        def fail(msg: str) -> NoReturn:
            raise DatasetError(f"{where}: {msg}")

        for t, n in self.node_counts.items():
            if not is_type_name(t):
                fail(f"node type {t!r} is not a type name: use letters, digits and underscores")
            if n < 0:
                fail(f"node type {t!r} has a negative count {n}")
        for et, (indptr, indices) in self.in_csr.items():
            key = relation_key(et)
            src, _, dst = et
            for t in (src, dst):
                if t not in self.node_counts:
                    fail(f"edge type {key} names node type {t!r}, which has no count")
            nd, ns = self.node_counts[dst], self.node_counts[src]
            if indptr.dtype != np.int64 or indptr.shape != (nd + 1,):
                fail(f"{key}: indptr must be int64 [{nd + 1}], got {indptr.dtype} {indptr.shape}")
            if indices.dtype not in (np.int32, np.int64) or indices.ndim != 1:
                fail(f"{key}: indices must be int32 or int64 [E], got {indices.dtype}")
            if indptr[0] != 0 or indptr[-1] != len(indices):
                fail(f"{key}: indptr must start at 0 and end at len(indices)")
            if nd and np.any(np.diff(indptr) < 0):
                fail(f"{key}: indptr must be non-decreasing")
            if len(indices) and (indices.min() < 0 or indices.max() >= ns):
                fail(f"{key}: source ids must lie in [0, {ns}) ({src} has {ns} nodes)")
            if deep:
                keys = np.repeat(np.arange(nd, dtype=np.int64), np.diff(indptr)) * ns
                keys += indices
                if np.any(np.diff(keys) <= 0):
                    fail(f"{key}: rows must be sorted without duplicates")
                rev = reverse_edge_type(et)
                if rev != et and rev in self.in_csr:
                    back = self.edge_index(rev)
                    back_keys = np.sort(back[0] * ns + back[1])
                    if not np.array_equal(back_keys, keys):
                        fail(f"{key} and {relation_key(rev)} are not each other's reverse")
        for t, feats in self.x.items():
            if t not in self.node_counts:
                fail(f"features given for node type {t!r}, which has no count")
            rows = self.node_counts[t]
            if feats.dtype != np.float32 or feats.ndim != 2 or feats.shape[0] != rows:
                fail(f"x[{t!r}] must be float32 [{rows}, F], got {feats.dtype} {feats.shape}")
        self._validate_labels(fail)

    def _validate_labels(self, fail: Callable[[str], NoReturn]) -> None:
        t = self.target_node_type
        if t not in self.node_counts:
            fail(f"target node type {t!r} is not one of {', '.join(self.node_counts)}")
        n = self.node_counts[t]
        if self.y.dtype != np.int64 or self.y.shape != (n,):
            fail(f"y must be int64 [{n}] ({t} nodes), got {self.y.dtype} {self.y.shape}")
        if self.num_classes < 1:
            fail(f"num_classes must be at least 1, got {self.num_classes}")
        if n and (self.y.min() < -1 or self.y.max() >= self.num_classes):
            fail(f"labels must be -1 (none) or lie in [0, num_classes={self.num_classes})")
        for name in ("train_mask", "val_mask", "test_mask"):
            m = getattr(self, name)
            if m.dtype != np.bool_ or m.shape != (n,):
                fail(f"{name} must be bool [{n}], got {m.dtype} {m.shape}")
            if np.any(m & (self.y < 0)):
                node = int(np.flatnonzero(m & (self.y < 0))[0])
                fail(f"{name} selects {t} node {node}, which has no label")


def _features(
    x: Mapping[str, npt.ArrayLike], counts: Mapping[str, int]
) -> dict[str, npt.NDArray[np.float32]]:
    out = {}
    for t, v in x.items():
        if t not in counts:
            raise DatasetError(
                f"features given for node type {t!r}, which is not one of {', '.join(counts)}"
            )
        feats = np.asarray(v, dtype=np.float32)
        out[t] = feats.reshape(len(feats), -1)
    return out


def _bool_mask(value: npt.ArrayLike, n: int) -> npt.NDArray[np.bool_]:
    """A bool mask as given, or one made from an index vector."""
    arr = np.asarray(value).reshape(-1)
    if arr.dtype == np.bool_:
        return arr
    ids = arr.astype(np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= n):
        raise DatasetError(f"a split lists node ids outside [0, {n}): give ids of the target type")
    mask = np.zeros(n, dtype=np.bool_)
    mask[ids] = True
    return mask


def choose_target_type(
    node_types: Sequence[str],
    labelled: Sequence[str],
    wanted: str | None,
    source: str | Path | None,
) -> str:
    """The target node type: ``wanted`` (spec.dataset.hetero.targetNodeType), which must be a
    node type with labels, or else the only labelled type. ``source`` names the file for
    the error."""
    listed = ", ".join(labelled) or "(none)"
    if wanted is not None:
        if wanted not in node_types:
            raise DatasetError(
                f"target node type {wanted!r} (spec.dataset.hetero.targetNodeType) is not one "
                f"of {', '.join(node_types)}",
                source=source,
            )
        if wanted not in labelled:
            raise DatasetError(
                f"target node type {wanted!r} (spec.dataset.hetero.targetNodeType) has no "
                f"labels; labelled types: {listed}",
                source=source,
            )
        return wanted
    if len(labelled) != 1:
        raise DatasetError(
            f"{len(labelled)} node types have labels ({listed}); name the target node type "
            "in spec.dataset.hetero.targetNodeType",
            source=source,
        )
    return labelled[0]
