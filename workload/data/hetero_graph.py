"""The in-memory heterogeneous graph every hetero dataset loads into, and its builder.

A :class:`HeteroGraphData` holds, per node type, a node count and (where the type has them)
float32 features; per edge type ``(src, rel, dst)`` a destination-indexed CSR: row ``d`` of
``in_csr[et]`` lists the ``src`` nodes whose messages reach ``dst`` node ``d`` over ``et``,
sorted, without duplicates. Labels and train/val/test masks belong to the target node type.
All arrays are numpy; nothing here imports torch.

:func:`hetero_csr_from_edges` adds reverse relations as PyG's ``ToUndirected`` does: a
relation within one type is made undirected in place; a relation between two types gets a
``rev_<rel>`` relation that carries its messages back (see :mod:`distgnn_api.edge_types`).
Duplicate edges are dropped and counted; self-loops are kept, as ``ToUndirected`` keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType, edge_type_key, is_type_name, reverse_edge_type
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import EDGE_CHUNK, IntArray, chunks, index_dtype

CSR = tuple[npt.NDArray[np.int64], IntArray]
"""``(indptr int64 [num_dst + 1], indices [E])``: a destination-indexed CSR of source ids."""
EdgeList = tuple[npt.ArrayLike, npt.ArrayLike]
"""``(src ids, dst ids)`` of one relation, in any order, duplicates allowed."""


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
            key = _key(et)
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
                        fail(f"{key} and {_key(rev)} are not each other's reverse")
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


def _key(edge_type: EdgeType) -> str:
    try:
        return edge_type_key(edge_type)
    except ValueError as err:
        raise DatasetError(str(err)) from None


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


def hetero_csr_from_edges(
    edges: Mapping[EdgeType, EdgeList],
    node_counts: Mapping[str, int],
    *,
    add_reverse: bool = True,
) -> tuple[dict[EdgeType, CSR], dict[str, Any]]:
    """Destination-indexed CSRs of per-relation edge lists, reverse relations added.

    With ``add_reverse``, a relation within one type holds both directions of each edge, and
    a relation between two types gets its reverse (``rev_<rel>``); where the input already
    holds a relation and its reverse (a graph saved after ``ToUndirected``), both come out as
    the union of the two, each the other's reverse. Ids are checked against the node counts.
    Returns ``(in_csr, info)``; edge types keep the input's order, each reverse added after
    all given ones. ``info`` counts duplicates dropped and self-loops kept, per relation key.
    """
    given = list(edges)
    for et in given:
        key = _key(et)
        for t in (et[0], et[2]):
            if t not in node_counts:
                raise DatasetError(
                    f"edge type {key} names node type {t!r}, which is not one of "
                    f"{', '.join(node_counts) or '(none)'}"
                )
    out: dict[EdgeType, CSR] = {}
    duplicates: dict[str, int] = {}
    self_loops: dict[str, int] = {}
    added: list[str] = []
    done: set[EdgeType] = set()
    for et in given:
        if et in done:
            continue
        src, _, dst = et
        ns, nd = node_counts[src], node_counts[dst]
        rev = reverse_edge_type(et)
        parts: list[tuple[EdgeType, bool]] = [(et, False)]
        if add_reverse and rev != et and rev in edges:
            parts.append((rev, True))
        both = add_reverse and rev == et
        keys = _edge_keys(edges, parts, node_counts, both=both)
        given_edges = len(keys) // 2 if both else len(keys)
        kept = sort_unique_keys(keys)
        keys = keys[:kept]
        loops = _loops(keys, ns) if src == dst else 0
        # Within one type each distinct edge is stored twice, a self-loop once.
        distinct = (kept + loops) // 2 if both else kept
        duplicates[_key(et)] = given_edges - distinct
        if src == dst:
            self_loops[_key(et)] = loops
        out[et] = _csr_from_sorted_keys(keys, nd, ns)
        done.add(et)
        if add_reverse and rev != et:
            # Swap the key's roles in place: dst * ns + src -> src * nd + dst.
            for a, b in chunks(len(keys)):
                d, s = np.divmod(keys[a:b], np.int64(ns))
                s *= nd
                s += d
                keys[a:b] = s
            keys.sort()
            if rev not in edges:
                added.append(_key(rev))
            out[rev] = _csr_from_sorted_keys(keys, ns, nd)
            done.add(rev)
        del keys
    # The given types in their order, then the reverses added.
    out = {et: out[et] for et in [*given, *(r for r in out if r not in edges)]}
    info: dict[str, Any] = {
        "duplicate_edges_dropped": duplicates,
        "self_loops": self_loops,
        "reverse_edge_types_added": added,
    }
    return out, info


def _edge_keys(
    edges: Mapping[EdgeType, EdgeList],
    parts: list[tuple[EdgeType, bool]],
    node_counts: Mapping[str, int],
    *,
    both: bool,
) -> npt.NDArray[np.int64]:
    """Keys ``dst * num_src + src`` of the edges of ``parts`` (flipped where marked), ids
    checked; ``both`` also adds every edge's other direction (a relation within one type)."""
    arrays = []
    for et, flipped in parts:
        s_ids, d_ids = (_ids(a, et) for a in edges[et])
        if len(s_ids) != len(d_ids):
            raise DatasetError(
                f"edge type {_key(et)} has {len(s_ids)} source ids but {len(d_ids)} "
                "destination ids; give one of each per edge"
            )
        _check_ids(et, s_ids, node_counts[et[0]], "source")
        _check_ids(et, d_ids, node_counts[et[2]], "destination")
        arrays.append((d_ids, s_ids) if flipped else (s_ids, d_ids))
    first = parts[0][0]
    ns = np.int64(node_counts[first[0]])
    m = sum(len(s) for s, _ in arrays)
    keys = np.empty(2 * m if both else m, dtype=np.int64)
    pos = 0
    for s_ids, d_ids in arrays:
        for a, b in chunks(len(s_ids)):
            s = s_ids[a:b].astype(np.int64)
            d = d_ids[a:b].astype(np.int64)
            np.multiply(d, ns, out=keys[pos : pos + b - a])
            keys[pos : pos + b - a] += s
            if both:
                np.multiply(s, ns, out=keys[m + pos : m + pos + b - a])
                keys[m + pos : m + pos + b - a] += d
            pos += b - a
    return keys


def _ids(value: npt.ArrayLike, et: EdgeType) -> npt.NDArray[Any]:
    arr = np.asarray(value)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise DatasetError(f"edge type {_key(et)}: node ids must be integers, got {arr.dtype}")
    return arr.reshape(-1)


def _check_ids(et: EdgeType, ids: npt.NDArray[Any], n: int, role: str) -> None:
    node_type = et[0] if role == "source" else et[2]
    for a, b in chunks(len(ids), 4 * EDGE_CHUNK):
        block = ids[a:b]
        bad = (block < 0) | (block >= n)
        if bad.any():
            i = a + int(np.flatnonzero(bad)[0])
            raise DatasetError(
                f"edge type {_key(et)}: edge {i} has {role} id {int(ids[i])} outside [0, {n}) "
                f"({node_type} has {n} nodes)"
            )


def _loops(keys: npt.NDArray[np.int64], n: int) -> int:
    """Self-loops among keys ``dst * n + src`` of a relation within one type."""
    count = 0
    for a, b in chunks(len(keys)):
        d, s = np.divmod(keys[a:b], np.int64(n))
        count += int(np.count_nonzero(d == s))
    return count


def sort_unique_keys(keys: npt.NDArray[np.int64]) -> int:
    """Sort ``keys`` in place and move the distinct ones to the front; return their count."""
    keys.sort()
    out = 0
    prev = np.int64(-1)
    for a, b in chunks(len(keys)):
        k = keys[a:b]
        keep = np.empty(len(k), dtype=np.bool_)
        keep[0] = k[0] != prev
        np.not_equal(k[1:], k[:-1], out=keep[1:])
        prev = k[-1]
        sel = k[keep]
        keys[out : out + len(sel)] = sel
        out += len(sel)
    return out


def _csr_from_sorted_keys(keys: npt.NDArray[np.int64], num_rows: int, num_cols: int) -> CSR:
    """The CSR of sorted, distinct keys ``row * num_cols + col``; columns narrowest dtype."""
    counts = np.zeros(num_rows, dtype=np.int64)
    for a, b in chunks(len(keys), 4 * EDGE_CHUNK):
        counts += np.bincount(keys[a:b] // np.int64(num_cols), minlength=num_rows)
    indptr = np.zeros(num_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(len(keys), dtype=index_dtype(num_cols))
    for a, b in chunks(len(keys)):
        indices[a:b] = keys[a:b] % np.int64(num_cols)
    return indptr, indices


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
