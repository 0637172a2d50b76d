"""Typed sampler servers with partitioned features: each holds its partition's featured rows
and a hot cache per node type, and fetches the rest from the owning sampler (the RPC
target's own code, in process). A batch is the same as from a sampler that holds every row;
the per-type cache metrics and the served-request counters move."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from prometheus_client import REGISTRY
from torch import Tensor
from torch.futures import Future

from distgnn_api.spec import DistGNNJobSpec, parse_spec
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.partition.store import HeteroPartitionStore
from distgnn_workload.partition.writer import write_partitions
from distgnn_workload.runtime import rpc_targets
from distgnn_workload.runtime.features.cache_policy import (
    held_bytes,
    load_typed_tables,
    whole_tables,
)
from distgnn_workload.runtime.features.remote import TypedFeatureSource
from distgnn_workload.runtime.features.requests import TypedFetchFn
from distgnn_workload.runtime.features.serving import (
    _serve_rows_of_type,
    serve_tables,
    set_type_serve_observer,
)
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.training_data import from_store
from distgnn_workload.runtime.wire import unpack_typed
from distgnn_workload.sampler.server import HeteroSamplerServer
from tests.support.futures import done

CPU = torch.device("cpu")


def _spec(cache_ratio: float) -> DistGNNJobSpec:
    return parse_spec(
        {
            "dataset": {"syntheticMag": {"scale": 0.002, "numClasses": 5}},
            "samplers": {"replicas": 2, "concurrency": 2, "cacheRatio": cache_ratio},
            "trainers": {"replicas": 2, "gpusPerPod": 0},
            "model": {"arch": "rsage", "numLayers": 2, "fanout": [6, 3]},
            "training": {"batchSize": 32},
        }
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> HeteroPartitionStore:
    graph = generate_mag(SyntheticHeteroConfig(scale=0.002, num_classes=5, seed=4))
    path = tmp_path_factory.mktemp("typed-server") / "store"
    write_partitions(path, graph, 2, spec=_spec(0.2).partition, key="k")
    return HeteroPartitionStore.open(path)


@pytest.fixture
def registry() -> Iterator[None]:
    rpc_targets.REGISTRY.clear()
    yield
    rpc_targets.REGISTRY.clear()


def _servers(
    store: HeteroPartitionStore, ratio: float, asked: list[tuple[int, str, int]]
) -> list[HeteroSamplerServer]:
    """Two samplers over the store's partitions, each asking the other for its rows."""
    tables = {h: load_typed_tables(store, h, ratio, CPU) for h in range(2)}
    data = from_store(store, features=False)

    def fetcher(tables_of: dict[int, dict[str, FeatureTable]]) -> TypedFetchFn:
        def fetch(holder: int, node_type: str, ids: Tensor) -> Future[Tensor]:
            asked.append((holder, node_type, int(ids.numel())))
            serve_tables(tables_of[holder])
            return done(_serve_rows_of_type(node_type, ids))

        return fetch

    return [
        HeteroSamplerServer(
            data,
            _spec(ratio),
            rank=h,
            device=CPU,
            concurrency=1,
            features=TypedFeatureSource(tables[h], fetcher(tables)),
        )
        for h in range(2)
    ]


def _sample_value(name: str, rank: int, node_type: str) -> float:
    value = REGISTRY.get_sample_value(name, {"rank": str(rank), "node_type": node_type})
    return 0.0 if value is None else value


def test_a_partial_cache_fetches_rows_from_the_owning_sampler_and_sends_the_same_batch(
    store: HeteroPartitionStore, registry: None
) -> None:
    whole = from_store(store)
    reference = HeteroSamplerServer(whole, _spec(0.2), rank=0, device=CPU, concurrency=1)
    asked: list[tuple[int, str, int]] = []
    servers = _servers(store, 0.2, asked)
    served: list[tuple[str, int]] = []
    set_type_serve_observer(lambda t, rows: served.append((t, int(rows.shape[0]))))
    lookups_before = _sample_value("distgnn_sampler_typed_feature_lookups_total", 1, "paper")
    for h, server in enumerate(servers):
        seeds = whole.train_ids[h][:32]
        for stream in (3, 4):
            hop, x, y = unpack_typed(server.sample(seeds, stream), CPU)
            want_hop, want_x, want_y = unpack_typed(reference.sample(seeds, stream), CPU)
            for t in hop.node_ids:
                assert torch.equal(hop.node_ids[t], want_hop.node_ids[t]), t
            assert set(x) == {"paper"}
            assert torch.equal(x["paper"], want_x["paper"])
            assert torch.equal(x["paper"], whole.x["paper"][hop.node_ids["paper"]])
            assert torch.equal(y, want_y)
    # each sampler asked the other, never itself, for the rows it neither owns nor caches
    assert {holder for holder, _, _ in asked} == {0, 1}
    assert all(n > 0 for _, _, n in asked)
    assert [n for _, n in served] == [n for _, _, n in asked]
    fetched = {h: s.features.fetched_rows["paper"] for h, s in enumerate(servers)}
    assert min(fetched.values()) > 0, fetched
    # the per-type look-ups and hits of the hot cache reach the metrics
    servers[1].update_cache_metrics()
    lookups = _sample_value("distgnn_sampler_typed_feature_lookups_total", 1, "paper")
    hits = _sample_value("distgnn_sampler_typed_feature_cache_hits_total", 1, "paper")
    ratio = _sample_value("distgnn_sampler_typed_feature_cache_hit_ratio", 1, "paper")
    assert lookups - lookups_before > 0
    assert 0 < ratio < 1
    assert hits < lookups


def test_a_sampler_holds_its_share_of_the_rows_not_every_row(
    store: HeteroPartitionStore, registry: None
) -> None:
    whole = held_bytes(whole_tables(from_store(store).x, CPU))
    for ratio in (0.0, 0.2):
        tables = [load_typed_tables(store, h, ratio, CPU) for h in range(2)]
        held = [held_bytes(t) for t in tables]
        owned = [t["paper"].num_owned for t in tables]
        # the owned rows of both samplers are every row once
        assert sum(owned) == store.meta.node_counts["paper"]
        for h in range(2):
            remote = tables[h]["paper"].num_remote
            rows = owned[h] + round(ratio * remote)
            assert held[h] == rows * store.meta.num_features["paper"] * 4
            assert held[h] < whole
    asked: list[tuple[int, str, int]] = []
    for server in _servers(store, 1.0, asked):
        assert server.features.tables["paper"].complete
        server.sample(from_store(store, features=False).train_ids[server.rank][:16], 1)
    assert asked == []  # a full cache sends no request
