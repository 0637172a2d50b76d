"""The size of a job's graph, as the capacity plan needs it: the counts it is computed from.

A heterogeneous graph whose per-type counts are known (ogbn-mag's published ones,
``syntheticMag``'s scaled ones, a typed store's) keeps them in ``node_types`` and its
relations' edge counts in ``relations``: the plan sizes each featured type's feature table,
each featureless type's learnable embeddings, the trainer's model, activations, mini-batches
and fixed-shape step, and the typed samplers' buffers per node type and relation
(:mod:`distgnn_api.typed_batches`); the rest comes from the homogeneous view (every node type
in one id space, rows as wide as the widest of features and embeddings), and ``approximate``
says which items. Where the counts come from (the spec, META.json or the command line):
:mod:`distgnn_api.graph_size_sources`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from distgnn_api.edge_types import EdgeType
from distgnn_api.spec import DistGNNJobSpec

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class SamplingProbe:
    """Mini-batches the partition Job sampled from the store (``partition/probe.py``), as
    META.json's ``sampling_probe`` records them: per batch of holder 0's seeds."""

    holders: int
    batch_size: int
    fanout: tuple[int, ...]
    cache_ratio: float
    distinct_nodes: float
    remote_nodes: float
    """Distinct nodes owned by another holder."""
    cache_hit_rate: float
    """Share of the remote nodes a hot cache of ``cache_ratio`` holds."""

    def matches(self, spec: DistGNNJobSpec) -> bool:
        """Whether the probe sampled batches of ``spec``'s shape."""
        return (
            self.holders == spec.num_holders
            and self.batch_size == spec.training.batch_size
            and self.fanout == tuple(spec.model.fanout)
        )


@dataclass(frozen=True)
class NodeTypeSize:
    """One node type of a heterogeneous graph."""

    name: str
    num_nodes: int
    num_features: int
    """0: a featureless type, with learnable embeddings (``model.embeddingDim``)."""


@dataclass(frozen=True)
class GraphSize:
    """The counts the plan is computed from."""

    num_nodes: int
    num_edges: int
    """Stored directed edges: each undirected edge twice (``META.json``'s ``num_edges``)."""
    num_features: int
    num_classes: int
    num_train_nodes: int
    """Seeds of one epoch."""
    source: str
    """Where the counts come from, in words."""
    edge_cut_fraction: float | None = None
    """Share of undirected edges cut by the partition, when measured (META.json)."""
    approximate: str = ""
    """Why the plan is only approximate for this graph ('' when it is not)."""
    probe: SamplingProbe | None = None
    """Sampled mini-batches of the store (META.json), when it was read."""
    node_types: tuple[NodeTypeSize, ...] = ()
    """A heterogeneous graph's node types, when their counts are known; () otherwise."""
    relations: tuple[RelationSize, ...] = ()
    """Its relations in the sampler's order (the given ones, then the ``rev_`` reverses
    ``addReverseEdges`` adds), with their stored edges; () when not known."""
    target_node_type: str = ""
    """The node type whose labels it trains on, where the counts say ('' otherwise)."""

    @property
    def featured_types(self) -> tuple[NodeTypeSize, ...]:
        return tuple(t for t in self.node_types if t.num_features > 0)

    @property
    def featureless_types(self) -> tuple[NodeTypeSize, ...]:
        return tuple(t for t in self.node_types if t.num_features == 0)

    @property
    def index_bytes(self) -> int:
        """Bytes of a stored node id: int32 below 2^31 nodes (``data.graph.index_dtype``)."""
        return 4 if self.num_nodes <= INT32_MAX else 8


@dataclass(frozen=True)
class RelationSize:
    """One relation (edge type) of a heterogeneous graph and the edges it stores."""

    src: str
    rel: str
    dst: str
    num_edges: int
    """Stored edges: a relation made undirected in place counts each edge twice."""

    @property
    def edge_type(self) -> EdgeType:
        return self.src, self.rel, self.dst


def distinct_draws(draws: float, num_nodes: int) -> float:
    """The expected number of distinct nodes among ``draws`` uniform draws (with
    replacement) from ``num_nodes``: ``N (1 - exp(-draws/N))``; 0 for an empty type. The
    plan's model of how many nodes a mini-batch reaches."""
    return num_nodes * -math.expm1(-draws / num_nodes) if num_nodes > 0 else 0.0
