"""The graphs the samplers read: destination-indexed CSRs, per edge type, checked once.

Every graph is typed; a homogeneous graph is the one-type case (one node type, one edge type,
:data:`~distgnn_workload.data.graph.EDGE_TYPE`). Input contract: for edge type ``(s, r, d)``,
``in_csr[(s, r, d)] = (indptr, indices)`` is indexed by destination: ``indptr`` (length
``num_nodes[d] + 1``) delimits, for every node of type ``d``, its in-neighbours
``indices[indptr[v]:indptr[v + 1]]``, ids of type ``s``. The samplers draw edge positions,
so with no parallel edges (the loaders' contract) the sampled neighbours of a node are
distinct. :func:`csc_from_edge_index` builds that layout from PyG's ``edge_index``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from distgnn_api.edge_types import KEY_SEPARATOR, EdgeType, parse_edge_type_key
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE

INT32_MAX = 2**31 - 1

Fanouts = Mapping[EdgeType, Sequence[int]] | Mapping[str, Sequence[int]] | Sequence[int]
"""One list for every edge type, or a list per edge type (keyed by the triple or its
``src__rel__dst`` spelling); entry ``h`` is hop ``h + 1``'s fanout (hop 1 is nearest the seeds): >= 1, 0 (sample none) or -1 (all neighbours)."""


def type_key(edge_type: EdgeType) -> str:
    """``src__rel__dst``, for messages (any names, unlike ``edge_type_key``)."""
    return KEY_SEPARATOR.join(edge_type)


def _edge_type(key: object) -> EdgeType:
    """An edge type from its triple or its ``src__rel__dst`` spelling."""
    if isinstance(key, str):
        return parse_edge_type_key(key)
    if isinstance(key, tuple) and len(key) == 3 and all(isinstance(p, str) for p in key):
        return key[0], key[1], key[2]
    raise ValueError(
        f"fanout key {key!r} is not an edge type: use (src, rel, dst) or src__rel__dst"
    )


def as_tensor(array: Tensor | np.ndarray, name: str) -> Tensor:
    if isinstance(array, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(array))
    if isinstance(array, Tensor):
        return array
    raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(array).__name__}")


def checked_csr(
    indptr: Tensor | np.ndarray,
    indices: Tensor | np.ndarray,
    num_src: int,
    num_dst: int,
    *,
    name: str,
    device: torch.device | str | None,
    dst_type: str | None = None,
) -> tuple[Tensor, Tensor]:
    """One destination-indexed CSR, checked, on ``device`` (None: where ``indptr`` is):
    ``indptr`` as int64, ``indices`` as int32 where ``num_src`` ids fit, else int64. The
    indices' range is the caller's to check (a partition's CSR holds global ids)."""
    indptr_t = as_tensor(indptr, f"{name} indptr")
    indices_t = as_tensor(indices, f"{name} indices")
    if device is None:
        device = indptr_t.device
    if indptr_t.dtype not in (torch.int32, torch.int64) or indices_t.dtype not in (
        torch.int32,
        torch.int64,
    ):
        raise TypeError(
            f"{name}: indptr/indices must be int32 or int64, got {indptr_t.dtype}/{indices_t.dtype}"
        )
    if indptr_t.dim() != 1 or indptr_t.numel() != num_dst + 1:
        nodes = "num_nodes" if dst_type is None else f"num_nodes[{dst_type!r}]"
        raise ValueError(
            f"{name}: indptr must be 1-D of length {nodes} + 1 = {num_dst + 1} (the CSR is "
            f"indexed by destination), got shape {list(indptr_t.shape)}"
        )
    if indices_t.dim() != 1:
        raise ValueError(f"{name}: indices must be a 1-D array of source ids")
    indptr_t = indptr_t.to(device, torch.int64)
    if int(indptr_t[0]) != 0 or int(indptr_t[-1]) != indices_t.numel():
        raise ValueError(
            f"{name}: indptr must start at 0 and end at len(indices)="
            f"{indices_t.numel()}, got {int(indptr_t[0])}..{int(indptr_t[-1])}"
        )
    if bool((indptr_t[1:] < indptr_t[:-1]).any()):
        raise ValueError(f"{name}: indptr must be non-decreasing")
    index_dtype = torch.int32 if num_src <= INT32_MAX else torch.int64
    return indptr_t, indices_t.to(device, index_dtype)


InCSR = Mapping[EdgeType, tuple[Tensor | np.ndarray, Tensor | np.ndarray]]
"""Per edge type, a graph's destination-indexed ``(indptr, indices)``."""


def one_type_fanouts(fanouts: Sequence[int]) -> list[int]:
    """The fanouts of a one-type graph's hops, checked."""
    out = [int(k) for k in fanouts]
    if not out or any(k == 0 or k < -1 for k in out):
        raise ValueError(
            f"fanouts must be a non-empty list of ints >= 1 (or -1 for all), got {out}"
        )
    return out


@dataclass
class TypedCSR:
    """Per edge type, the destination-indexed CSR on one device, checked.

    ``indptr[et]`` is int64 with one extra entry: node id ``num_nodes[d]`` is a node of
    degree 0, the padding of static-shape batches. ``indices[et]`` is int32 where the source
    type's ids fit, else int64.
    """

    num_nodes: dict[str, int]
    edge_types: list[EdgeType]
    indptr: dict[EdgeType, Tensor]
    indices: dict[EdgeType, Tensor]

    @property
    def device(self) -> torch.device:
        return next(iter(self.indptr.values())).device

    @classmethod
    def build(
        cls,
        in_csr: Mapping[EdgeType, tuple[Tensor | np.ndarray, Tensor | np.ndarray]],
        num_nodes: Mapping[str, int],
        device: torch.device | str | None = None,
    ) -> TypedCSR:
        if not in_csr:
            raise ValueError("in_csr is empty: give at least one edge type's CSR")
        counts = {str(t): int(n) for t, n in num_nodes.items()}
        for node_type, n in counts.items():
            if n < 0:
                raise ValueError(f"num_nodes[{node_type!r}] is {n}: counts must be >= 0")
        indptrs: dict[EdgeType, Tensor] = {}
        indices: dict[EdgeType, Tensor] = {}
        for edge_type, (indptr_a, indices_a) in in_csr.items():
            name = f"in_csr[{type_key(edge_type)!r}]"
            src, _, dst = edge_type
            for node_type in (src, dst):
                if node_type not in counts:
                    raise ValueError(f"{name}: node type {node_type!r} is missing in num_nodes")
            indptr_t, indices_t = checked_csr(
                indptr_a,
                indices_a,
                counts[src],
                counts[dst],
                name=name,
                device=device,
                dst_type=dst,
            )
            device = indptr_t.device
            if indices_t.numel() and (
                int(indices_t.min()) < 0 or int(indices_t.max()) >= counts[src]
            ):
                raise ValueError(
                    f"{name}: indices must be {src!r} ids in [0, {counts[src]}), got "
                    f"{int(indices_t.min())}..{int(indices_t.max())}"
                )
            indptrs[edge_type] = torch.cat([indptr_t, indptr_t[-1:]])
            indices[edge_type] = indices_t
        return cls(counts, list(in_csr), indptrs, indices)

    @classmethod
    def one_type(
        cls,
        indptr: Tensor | np.ndarray,
        indices: Tensor | np.ndarray,
        device: torch.device | str | None = None,
    ) -> TypedCSR:
        """The one-type graph of ``indptr``/``indices`` (the nodes whose messages flow into
        each node), on ``device`` (None: indptr's)."""
        indptr_t = as_tensor(indptr, "indptr")
        if indptr_t.dim() != 1 or indptr_t.numel() < 1:
            raise ValueError("indptr must be a 1-D array of length num_nodes + 1")
        device = torch.device(device) if device is not None else indptr_t.device
        n = indptr_t.numel() - 1
        indptr_t, indices_t = checked_csr(indptr_t, indices, n, n, name="the CSR", device=device)
        # one extra node id, num_nodes, of degree 0: the padding of static-shape batches
        ext = torch.cat([indptr_t, indptr_t[-1:]])
        return cls({NODE_TYPE: n}, [EDGE_TYPE], {EDGE_TYPE: ext}, {EDGE_TYPE: indices_t})

    def fanouts(self, fanouts: Fanouts, *, allow_all: bool = True) -> dict[EdgeType, list[int]]:
        """Per edge type, the fanout of each hop: one list for all, or a list per edge type."""
        if isinstance(fanouts, Mapping):
            by_type = {_edge_type(et): ks for et, ks in fanouts.items()}
            unknown = [type_key(et) for et in by_type if et not in self.indptr]
            if unknown:
                known = ", ".join(type_key(et) for et in self.edge_types)
                raise ValueError(
                    f"fanouts name edge types the graph does not have: {', '.join(unknown)} "
                    f"(it has {known})"
                )
            missing = [type_key(et) for et in self.edge_types if et not in by_type]
            if missing:
                raise ValueError(
                    f"fanouts lack edge types {', '.join(missing)}: give a list for every "
                    "edge type, or one list for all"
                )
            out = {et: [int(k) for k in by_type[et]] for et in self.edge_types}
        else:
            one = [int(k) for k in fanouts]
            out = {et: list(one) for et in self.edge_types}
        lengths = {len(v) for v in out.values()}
        if len(lengths) != 1 or 0 in lengths:
            raise ValueError(
                "fanouts must give every edge type the same number of hops (>= 1), got "
                + ", ".join(f"{type_key(et)}: {v}" for et, v in out.items())
            )
        for et, values in out.items():
            if any(k < -1 or (k == -1 and not allow_all) for k in values):
                need = ">= 0" if not allow_all else ">= 0 or -1 (all)"
                raise ValueError(f"fanouts[{type_key(et)!r}] = {values}: each must be {need}")
        return out

    def key_nodes(self, edge_type: EdgeType) -> int:
        """The id space of ``edge_type``'s edge exclusion keys: both ends' ids fit it."""
        return max(self.num_nodes[edge_type[0]], self.num_nodes[edge_type[2]])

    def check_seeds(self, seeds: Tensor, seed_type: str) -> None:
        """Seeds are ids of a known node type, in range (checked where the seeds are)."""
        if seed_type not in self.num_nodes:
            raise ValueError(
                f"seed type {seed_type!r} is not a node type of the graph "
                f"({', '.join(self.num_nodes)})"
            )
        n = self.num_nodes[seed_type]
        if seeds.numel() and bool(((seeds < 0) | (seeds >= n)).any()):
            raise ValueError(f"seeds must be {seed_type!r} ids in [0, {n})")


def csc_from_edge_index(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """``(indptr, indices)`` listing, for every node, the sources of the edges into it.

    This is the layout ``NeighborSampler`` reads for PyG's ``edge_index = [source, target]``
    (sources in their ``edge_index`` order within a row).
    """
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
    src, dst = edge_index[0].to(torch.int64), edge_index[1].to(torch.int64)
    order = torch.argsort(dst, stable=True)
    return _csc(src, dst, order, num_nodes, num_nodes, "edge_index", "num_nodes")


def csc_of_edge_type(
    edge_index: Tensor, num_src: int, num_dst: int, name: str, dst_type: str
) -> tuple[Tensor, Tensor, Tensor]:
    """``(indptr, indices, order)``: the destination CSR of one edge type's ``edge_index``
    (sources sorted within a row), and the permutation from CSR positions to its edges."""
    src, dst = edge_index[0].to(torch.int64), edge_index[1].to(torch.int64)
    order = torch.argsort(dst * num_src + src, stable=True)
    indptr, indices = _csc(src, dst, order, num_src, num_dst, name, f"num_nodes[{dst_type!r}]")
    return indptr, indices, order


def _csc(
    src: Tensor, dst: Tensor, order: Tensor, num_src: int, num_dst: int, name: str, what: str
) -> tuple[Tensor, Tensor]:
    counts = torch.bincount(dst, minlength=num_dst)
    if counts.numel() > num_dst:
        raise ValueError(f"{name} names node {counts.numel() - 1} but {what}={num_dst}")
    indptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=dst.device)
    torch.cumsum(counts, 0, out=indptr[1:])
    index_dtype = torch.int32 if num_src <= INT32_MAX else torch.int64
    return indptr, src[order].to(index_dtype)
