"""The in-memory graphs datasets load into. Every graph is typed; a homogeneous one is the
one-type case, kept in its own layout for speed.

A :class:`HeteroGraphData` holds, per node type, a node count and (where the type has them)
float32 features; per edge type ``(src, rel, dst)`` a destination-indexed CSR: row ``d`` of
``in_csr[et]`` lists the ``src`` nodes whose messages reach ``dst`` node ``d`` over ``et``,
sorted, without duplicates. Labels and train/val/test masks belong to the target node type.
Its builder (:func:`~distgnn_workload.data.csr.typed_csr_from_edges`) adds reverse relations
as PyG's ``ToUndirected`` does: a relation within one type is made undirected in place; a
relation between two types gets a ``rev_<rel>`` relation that carries its messages back (see
:mod:`distgnn_api.edge_types`). Duplicate edges are dropped and counted; self-loops are kept.

A :class:`GraphData` is a graph of one node type and one edge type: an undirected CSR that
holds both directions of every edge, sorted within each row, with no self-loops and no
duplicates, plus features, labels and split masks. :meth:`GraphData.typed` is that same graph
as a :class:`HeteroGraphData` (node type ``node``, edge type ``node__to__node``), sharing
its arrays. All arrays are numpy; nothing here imports torch. The loaders' helpers for
labels and split masks are in :mod:`distgnn_workload.data.labels`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType, is_type_name, reverse_edge_type
from distgnn_workload.data.csr import (
    CSR,
    EdgeList,
    IntArray,
    csr_from_edges,
    relation_key,
    typed_csr_from_edges,
)
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.labels import bool_mask

NODE_TYPE: Final = "node"
"""The node type of a homogeneous graph seen as a typed one."""
EDGE_TYPE: Final[EdgeType] = (NODE_TYPE, "to", NODE_TYPE)
"""Its one edge type: within one type, so it is its own reverse (undirected)."""


@dataclass
class GraphData:
    """An undirected graph with node features, labels and train/val/test splits.

    ``indptr``/``indices`` are a CSR holding each undirected edge in both directions.
    ``num_classes`` is explicit because a split may not contain every class.
    """

    indptr: npt.NDArray[np.int64]
    indices: IntArray
    x: npt.NDArray[np.float32]
    y: npt.NDArray[np.int64]
    train_mask: npt.NDArray[np.bool_]
    val_mask: npt.NDArray[np.bool_]
    test_mask: npt.NDArray[np.bool_]
    num_classes: int
    name: str = "graph"
    info: dict[str, Any] = field(default_factory=dict)
    """Facts about how the graph was made (e.g. dropped duplicate edges), kept in META.json."""

    @classmethod
    def from_edges(
        cls,
        src: npt.ArrayLike,
        dst: npt.ArrayLike,
        x: npt.ArrayLike,
        y: npt.ArrayLike,
        train_mask: npt.ArrayLike,
        val_mask: npt.ArrayLike,
        test_mask: npt.ArrayLike,
        *,
        num_classes: int | None = None,
        name: str = "graph",
    ) -> GraphData:
        """A graph from an edge list (either direction, duplicates allowed) and node arrays."""
        xa = np.asarray(x, dtype=np.float32)
        ya = np.asarray(y, dtype=np.int64)
        n = len(xa)
        indptr, indices, info = csr_from_edges(
            np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), n
        )
        graph = cls(
            indptr=indptr,
            indices=indices,
            x=xa.reshape(n, -1),
            y=ya,
            train_mask=np.asarray(train_mask, dtype=np.bool_),
            val_mask=np.asarray(val_mask, dtype=np.bool_),
            test_mask=np.asarray(test_mask, dtype=np.bool_),
            num_classes=int(num_classes if num_classes is not None else ya.max(initial=-1) + 1),
            name=name,
            info=dict(info),
        )
        graph.validate()
        return graph

    @property
    def num_nodes(self) -> int:
        return len(self.indptr) - 1

    @property
    def num_edges(self) -> int:
        """Stored directed edges: twice the undirected edges."""
        return len(self.indices)

    @property
    def num_undirected_edges(self) -> int:
        return len(self.indices) // 2

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    def degrees(self) -> npt.NDArray[np.int64]:
        return np.diff(self.indptr)

    def nbytes(self) -> int:
        arrays = (self.indptr, self.indices, self.x, self.y)
        masks = (self.train_mask, self.val_mask, self.test_mask)
        return sum(a.nbytes for a in arrays + masks)

    def typed(self) -> HeteroGraphData:
        """This graph as the one-type case of a typed graph, sharing every array: node type
        :data:`NODE_TYPE`, edge type :data:`EDGE_TYPE` (its CSR is symmetric, so the in-CSR
        is this CSR), every node of the target type."""
        return HeteroGraphData(
            node_counts={NODE_TYPE: self.num_nodes},
            in_csr={EDGE_TYPE: (self.indptr, self.indices)},
            x={NODE_TYPE: self.x},
            target_node_type=NODE_TYPE,
            y=self.y,
            train_mask=self.train_mask,
            val_mask=self.val_mask,
            test_mask=self.test_mask,
            num_classes=self.num_classes,
            name=self.name,
            info=self.info,
        )

    def validate(self, *, deep: bool = False) -> None:
        """Check shapes, dtypes and ranges; ``deep`` also checks symmetry and row order (slow)."""
        n = self.num_nodes
        where = f"graph {self.name!r}"

        def fail(msg: str) -> None:
            raise DatasetError(f"{where}: {msg}")

        if self.indptr.dtype != np.int64 or self.indptr.ndim != 1 or n < 0:
            fail(f"indptr must be int64 [N+1], got {self.indptr.dtype} {self.indptr.shape}")
        if self.indices.dtype not in (np.int32, np.int64) or self.indices.ndim != 1:
            fail(f"indices must be int32 or int64 [E], got {self.indices.dtype}")
        if self.indptr[0] != 0 or self.indptr[-1] != len(self.indices):
            fail("indptr must start at 0 and end at len(indices)")
        if n > 0 and np.any(np.diff(self.indptr) < 0):
            fail("indptr must be non-decreasing")
        if len(self.indices) and (self.indices.min() < 0 or self.indices.max() >= n):
            fail(f"indices must lie in [0, {n})")
        if self.x.dtype != np.float32 or self.x.ndim != 2 or self.x.shape[0] != n:
            fail(f"x must be float32 [{n}, F], got {self.x.dtype} {self.x.shape}")
        if self.y.dtype != np.int64 or self.y.shape != (n,):
            fail(f"y must be int64 [{n}], got {self.y.dtype} {self.y.shape}")
        if n and (self.y.min() < 0 or self.y.max() >= self.num_classes):
            fail(f"labels must lie in [0, num_classes={self.num_classes})")
        for name in ("train_mask", "val_mask", "test_mask"):
            m = getattr(self, name)
            if m.dtype != np.bool_ or m.shape != (n,):
                fail(f"{name} must be bool [{n}], got {m.dtype} {m.shape}")
        if deep:
            src = np.repeat(np.arange(n, dtype=np.int64), self.degrees())
            dst = self.indices.astype(np.int64)
            if np.any(src == dst):
                fail("the CSR has self-loops")
            keys = src * n + dst
            if np.any(np.diff(keys) <= 0):
                fail("rows must be sorted without duplicates")
            rev = np.sort(dst * n + src)
            if not np.array_equal(rev, keys):
                fail("the CSR is not symmetric: some edge lacks its reverse")


class GraphTypes:
    """The node and edge types of a typed graph, from its ``node_counts``, ``in_csr`` and ``x``
    (the types that have features): shared by the dataset's graph and the trainer's view of
    it (:class:`~distgnn_workload.runtime.training_data.HeteroTrainingData`)."""

    node_counts: Mapping[str, int]
    in_csr: Mapping[EdgeType, Any]
    x: Mapping[str, Any]

    @property
    def node_types(self) -> list[str]:
        return list(self.node_counts)

    @property
    def edge_types(self) -> list[EdgeType]:
        return list(self.in_csr)

    @property
    def featureless_types(self) -> list[str]:
        return [t for t in self.node_counts if t not in self.x]


@dataclass
class HeteroGraphData(GraphTypes):
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
        in_csr, info = typed_csr_from_edges(edges, counts, add_reverse=add_reverse)
        ya = np.asarray(y, dtype=np.int64)
        graph = cls(
            node_counts=counts,
            in_csr=in_csr,
            x=_features(x, counts),
            target_node_type=target_node_type,
            y=ya,
            train_mask=bool_mask(train_mask, len(ya)),
            val_mask=bool_mask(val_mask, len(ya)),
            test_mask=bool_mask(test_mask, len(ya)),
            num_classes=int(num_classes if num_classes is not None else ya.max(initial=-1) + 1),
            name=name,
            info=info,
        )
        graph.validate()
        return graph

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
