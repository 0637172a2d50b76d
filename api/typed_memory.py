"""A typed graph's per-type tables in a pod: each holder's feature table of every featured
node type (``samplers.featureMemory``, shared among them) and each training process's shards
of the featureless types' learnable embeddings (``trainers.embeddingMemory``).

Sized from :attr:`GraphSize.node_types <distgnn_api.graph_size.GraphSize.node_types>`; each
type's nodes are taken to spread over the partitions as evenly as all nodes do
(:attr:`Shapes.owned_nodes`). Used by :mod:`distgnn_api.capacity`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from distgnn_api.feature_memory import (
    ADAM_STATE_ROWS,
    feature_budget,
    host_shard_bytes,
    host_shards,
    shard_bytes,
    shared_budgets,
    table_split,
)
from distgnn_api.graph_size import GraphSize, NodeTypeSize
from distgnn_api.kube import AUTO
from distgnn_api.pod_memory import (
    CUDA_CONTEXT_BYTES,
    GIB,
    ROW_ITEMS,
    Item,
    Shapes,
    Where,
    holder_items,
)
from distgnn_api.spec import DistGNNJobSpec

FEATURE_FIELD = "spec.samplers.featureMemory"
EMBEDDING_FIELD = "spec.trainers.embeddingMemory"


@dataclass(frozen=True)
class TypedTable:
    """One type's table in one process: where its bytes are."""

    node_type: str
    rows: int
    """Rows held: a holder's owned and cached features; a process's embedding shard."""
    gpu: int
    """Bytes on the process's device."""
    host: int
    """Bytes in pinned host memory (0: none)."""
    table: int
    """Bytes of the whole table, on one device."""


def _owned(t: NodeTypeSize, graph: GraphSize, s: Shapes) -> int:
    """A holder's nodes of type ``t``: the share of all nodes it owns (balance included)."""
    return min(t.num_nodes, math.ceil(t.num_nodes * s.owned_nodes / graph.num_nodes))


def _budget(value: int | str | None, s: Shapes, dev: Where, loaded: int, field: str) -> int | None:
    """runtime/device_budget.py device_budget on the plan's card: ``auto`` on the memory the
    process has left after its CUDA context and ``loaded`` bytes; none on a CPU."""
    if value is None or (dev != "gpu" and value == AUTO):
        return None
    free = s.gpu_memory - CUDA_CONTEXT_BYTES - loaded
    return feature_budget(value, free, s.gpu_memory, field=field)


def feature_tables(
    spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where
) -> list[TypedTable]:
    """Each featured type's table on one holder (runtime/features/cache_policy.py
    load_typed_tables): the owned rows plus ``cacheRatio`` of the others'; under a budget
    each type gets its share, in proportion to its table (the typed holder passes no other
    bytes to the budget)."""
    row_bytes = {t.name: t.num_features * s.feature_bytes for t in graph.featured_types}
    held = {}
    for t in graph.featured_types:
        own = _owned(t, graph, s)
        held[t.name] = own + round(spec.samplers.cache_ratio * (t.num_nodes - own))
    sizes = {name: rows * row_bytes[name] for name, rows in held.items()}
    budget = _budget(spec.samplers.feature_memory, s, dev, 0, FEATURE_FIELD)
    out = []
    for name, share in shared_budgets(budget, sizes).items():
        gpu, host = table_split(share, held[name], row_bytes[name])
        out.append(TypedTable(name, held[name], gpu, host, sizes[name]))
    return out


def embedding_rows(t: NodeTypeSize, graph: GraphSize, s: Shapes, spec: DistGNNJobSpec) -> int:
    """Rows of type ``t`` one training process owns (embeddings/ownership.py
    RowOwnership.from_partition_book): each partition's rows cut into contiguous blocks
    among the ranks that serve it, so a holder's rows over the processes per holder."""
    processes = spec.trainers.replicas * max(1, spec.trainers.gpus_per_pod)
    return min(t.num_nodes, math.ceil(_owned(t, graph, s) * s.holders / processes))


def embedding_tables(
    spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where, loaded: int = 0
) -> list[TypedTable]:
    """Each featureless type's shard in one training process, rows and Adam's two moments
    (fp32), on the device or whole in pinned host memory (embeddings/placement.py
    host_shards). ``loaded``: device bytes the process holds when it places them (a
    worker-mode holder's), which ``auto`` leaves."""
    dim = spec.model.embedding_size
    rows = [embedding_rows(t, graph, s, spec) for t in graph.featureless_types]
    sizes = [shard_bytes(r, dim, ADAM_STATE_ROWS) for r in rows]
    budget = _budget(spec.trainers.embedding_memory, s, dev, loaded, EMBEDDING_FIELD)
    out = []
    for t, r, size, on_host in zip(
        graph.featureless_types, rows, sizes, host_shards(sizes, budget), strict=True
    ):
        host = host_shard_bytes(r, dim, ADAM_STATE_ROWS) if on_host else 0
        out.append(TypedTable(t.name, r, 0 if on_host else size, host, size))
    return out


def typed_holder_items(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> list[Item]:
    """A holder of a typed graph: per featured type its table (tiered under featureMemory),
    slot map and load staging; the rest as the homogeneous view's holder."""
    untiered = spec.model_copy(
        update={"samplers": spec.samplers.model_copy(update={"feature_memory": None})}
    )
    rest = [
        i
        for i in holder_items(untiered, graph, s, dev)
        if not i.what.startswith((*ROW_ITEMS, "load staging", "feature slot map"))
    ]
    nodes = {t.name: t.num_nodes for t in graph.featured_types}
    width = {t.name: t.num_features for t in graph.featured_types}
    items = []
    for table in feature_tables(spec, graph, s, dev):
        t, n = table.node_type, nodes[table.node_type]
        own = _owned(NodeTypeSize(t, n, width[t]), graph, s)
        if table.host:
            items += [
                Item(f"features of {t}, GPU tier (hottest rows, its share of featureMemory)",
                     table.gpu, dev, "features/table.py FeatureTable.place"),
                Item(f"features of {t}, pinned host tier ({table.rows:,} rows, 128-byte "
                     "aligned)", table.host, "host", "features/tiers.py own_rows"),
            ]  # fmt: skip
        else:
            items.append(Item(f"features of {t} ({own:,} owned + {table.rows - own:,} cached "
                              "rows)", table.gpu, dev,
                              "features/cache_policy.py load_typed_tables"))  # fmt: skip
            if table.rows > own:
                items.append(Item(f"cache append of {t} (torch.cat of its rows)", table.gpu,
                                  dev, "features/table.py FeatureTable.reserve",
                                  transient=True))  # fmt: skip
        items += [
            Item(f"load staging of {t} (float32 rows, then cast)",
                 own * width[t] * (4 + s.feature_bytes), "host",
                 "cache_policy.py load_typed_tables np.array, .to(dtype)", transient=True),
            Item(f"slot map and owners of {t} (int32 + int64 per node)", n * 12, dev,
                 "table.py FeatureTable.slot, .owner"),
            Item(f"own-slot map of {t} (int64 per node)", n * 8, "host",
                 "table.py FeatureTable.own_slot"),
        ]  # fmt: skip
        if table.host or table.rows > own:
            items.append(Item(f"in-degrees of {t} (hotness, int64 per node)", n * 8, "host",
                              "cache_policy.py in_degrees", transient=True))  # fmt: skip
    return items + rest


def embedding_items(
    spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where, loaded: int = 0
) -> list[Item]:
    """A training process's learnable embeddings (trainer/learnt_inputs.py): per featureless
    type its shard where the placement puts it, and its row routing."""
    dim = spec.model.embedding_size
    nodes = {t.name: t.num_nodes for t in graph.featureless_types}
    items = []
    for table in embedding_tables(spec, graph, s, dev, loaded):
        t = table.node_type
        what = f"embeddings of {t} ({table.rows:,} rows x {dim}, 2 Adam moments, fp32)"
        if table.host:
            items.append(Item(f"{what}, pinned host memory (embeddingMemory)", table.host,
                              "host", "embeddings/placement.py host_shards, "
                              "features/tiers.py pinned_rows"))  # fmt: skip
        else:
            items.append(Item(what, table.gpu, dev,
                              "embeddings/table.py ShardedEmbedding, optim.py RowSparseAdam"))  # fmt: skip
        items.append(Item(f"ownership of {t} (owner, local: int64 per node)", 16 * nodes[t],
                          "host", "embeddings/ownership.py RowOwnership"))  # fmt: skip
        if dev == "gpu":
            items.append(Item(f"embedding routing of {t} (owner, local on the device)",
                              16 * nodes[t], dev,
                              "embeddings/table.py ShardedEmbedding._owner, _local"))  # fmt: skip
    return items


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def _placed(tables: list[TypedTable], dev: Where) -> str:
    on = "on the GPU" if dev == "gpu" else "in the process's memory"
    parts = []
    for t in tables:
        if not t.host:
            parts.append(f"{t.node_type} {_gib(t.table)} {on}")
        elif t.gpu:
            parts.append(
                f"{t.node_type} {_gib(t.table)}: {_gib(t.gpu)} "
                f"({100.0 * t.gpu / max(t.table, 1):.0f}%) {on}, all of it in pinned host "
                "memory, read in place"
            )
        else:
            parts.append(f"{t.node_type} {_gib(t.table)} in pinned host memory")
    return "; ".join(parts)


def typed_notes(
    spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, holder: Where, trainer: Where, loaded: int
) -> list[str]:
    """The plan's notes on a typed graph's tables: each featured type's split under
    featureMemory, and where each embedding shard goes."""
    notes = []
    value = spec.samplers.feature_memory
    if value is not None and (holder == "gpu" or value != AUTO) and graph.featured_types:
        notes.append(
            f"feature tables per holder (featureMemory {value}, shared by the featured types "
            f"in proportion to their tables): {_placed(feature_tables(spec, graph, s, holder), holder)}"
        )
    if graph.featureless_types:
        tables = embedding_tables(spec, graph, s, trainer, loaded)
        budget = spec.trainers.embedding_memory
        how = (
            "no embeddingMemory"
            if budget is None
            else f"embeddingMemory {budget}, the smallest shards on the device first"
        )
        notes.append(
            f"learnable embeddings per training process (rows and 2 Adam moments, fp32; "
            f"{how}): {_placed(tables, trainer)}"
        )
    return notes
