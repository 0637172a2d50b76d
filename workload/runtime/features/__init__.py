"""Node features of one holder, plus remote features behind a hot-feature cache.

A *holder* is a process that holds partitions: a sampler in server-client mode, a trainer
pod in worker mode. It owns the contiguous new-id range of its partitions and keeps their
features on its device. Features of other holders' nodes come from their owner: between
trainers (worker mode) over the feature exchange's collectives, between sampler servers over
RPC; a share (``samplers.cacheRatio``) of the remote nodes, the hottest ones, is fetched
once at start-up and kept. One table serves both: ``slot[id]`` is the row of a node's
features in the table (local rows first, cached rows after), or -1 when it must be fetched.
With a cache ratio of 1 every node has a row and a gather is one GPU kernel, no host sync.
Over a GPU budget (``samplers.featureMemory``) the rows live in pinned host memory, the
hottest also on the GPU, and one kernel gathers from both tiers (:mod:`.tiers`).
A holder of a typed store has a table and a source per featured node type, the owner of
each row in the table's owner map, not in a range of new ids
(:func:`.cache_policy.load_typed_tables`, :class:`.remote.TypedFeatureSource`): a
homogeneous holder's is the one-type case.

The concerns, one module each, each layer importing only those below it:
:mod:`.cache_policy` (which remote nodes to cache, filling the cache) over :mod:`.remote`
(the loader's feature source) over :mod:`.exchange` (the trainers' rounds of counts, ids and
rows) and :mod:`.requests` (requests for rows over RPC) over :mod:`.serving` (the RPC targets
that answer other holders) over :mod:`.table`
(the table) over :mod:`.layout` (who owns which nodes) and :mod:`.tiers` (the rows' GPU and
pinned host tiers).
"""

from distgnn_workload.runtime.features.cache_policy import (
    FETCH_CHUNK,
    fill_cache,
    fill_cache_from,
    presample_counts,
    select_hot,
)
from distgnn_workload.runtime.features.exchange import FeatureExchange, new_exchange_group
from distgnn_workload.runtime.features.layout import (
    HolderData,
    HolderLayout,
    load_holder,
    load_labels,
    split_ids,
)
from distgnn_workload.runtime.features.pending import FeatureStats, PendingGather
from distgnn_workload.runtime.features.remote import DistributedFeatureSource
from distgnn_workload.runtime.features.requests import FetchFn, rpc_fetch, rpc_fetch_into
from distgnn_workload.runtime.features.serving import (
    FEATURE_SLOTS,
    SERVE_OBSERVER,
    SERVED_TABLE,
    feature_slot_spec,
    serve_table,
    set_serve_observer,
)
from distgnn_workload.runtime.features.table import FeatureTable

__all__ = [
    "FEATURE_SLOTS",
    "FETCH_CHUNK",
    "SERVED_TABLE",
    "SERVE_OBSERVER",
    "DistributedFeatureSource",
    "FeatureExchange",
    "FeatureStats",
    "FeatureTable",
    "FetchFn",
    "HolderData",
    "HolderLayout",
    "PendingGather",
    "feature_slot_spec",
    "fill_cache",
    "fill_cache_from",
    "load_holder",
    "load_labels",
    "new_exchange_group",
    "presample_counts",
    "rpc_fetch",
    "rpc_fetch_into",
    "select_hot",
    "serve_table",
    "set_serve_observer",
    "split_ids",
]
