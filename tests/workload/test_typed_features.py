"""Typed features of a worker-mode holder against the typed store: owned rows, the hot cache
per node type, and the rows fetched from their owners (the RPC target itself, in process);
the table and source of a type owned by one holder, with no owner map."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch
from torch import Tensor
from torch.futures import Future

from distgnn_api.spec import PartitionAlgorithm, PartitionSpec
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.partition.store import HeteroPartitionStore
from distgnn_workload.partition.writer import write_partitions
from distgnn_workload.runtime import rpc_targets
from distgnn_workload.runtime.features.cache_policy import (
    in_degrees,
    load_typed_tables,
    whole_tables,
)
from distgnn_workload.runtime.features.remote import (
    DistributedFeatureSource,
    TypedFeatureSource,
)
from distgnn_workload.runtime.features.requests import TypedFetchFn
from distgnn_workload.runtime.features.serving import (
    _serve_rows_of_type,
    serve_tables,
)
from distgnn_workload.runtime.features.table import FeatureTable
from tests.support.futures import done

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> HeteroPartitionStore:
    graph = generate_mag(SyntheticHeteroConfig(scale=0.002, num_classes=4, seed=5))
    path = tmp_path_factory.mktemp("typed") / "store"
    write_partitions(
        path, graph, 2, spec=PartitionSpec(algorithm=PartitionAlgorithm.random), key="k"
    )
    return HeteroPartitionStore.open(path)


@pytest.fixture(scope="module")
def reference(store: HeteroPartitionStore) -> dict[str, Tensor]:
    return {t: torch.from_numpy(np.asarray(x)) for t, x in store.to_graph().x.items()}


@pytest.fixture
def registry() -> Iterator[None]:
    rpc_targets.REGISTRY.clear()
    yield
    rpc_targets.REGISTRY.clear()


def _fetcher(tables: dict[int, dict[str, FeatureTable]], calls: list[int]) -> TypedFetchFn:
    """The owner's table answers, through the RPC target's own code."""

    def fetch(holder: int, node_type: str, ids: Tensor) -> Future[Tensor]:
        calls.append(holder)
        serve_tables(tables[holder])
        return done(_serve_rows_of_type(node_type, ids))

    return fetch


def test_a_partial_cache_holds_own_and_hottest_rows_and_fetches_the_rest_exactly(
    store: HeteroPartitionStore, reference: dict[str, Tensor], registry: None
) -> None:
    tables = {p: load_typed_tables(store, p, 0.2, CPU) for p in range(2)}
    assert set(tables[0]) == {"paper"}
    table = tables[0]["paper"]
    owner = torch.from_numpy(np.asarray(store.owner("paper"), dtype=np.int64))
    assert table.num_owned == int((owner == 0).sum())
    assert table.num_cached == round(0.2 * table.num_remote)
    assert not table.complete
    # the cached rows are the hottest remote ones by in-degree
    deg = in_degrees(store, "paper")
    cached = ((table.slot >= 0) & (owner != 0)).nonzero().squeeze(1)
    uncached = ((table.slot < 0) & (owner != 0)).nonzero().squeeze(1)
    assert int(deg[cached].min()) >= int(deg[uncached].max())

    calls: list[int] = []
    source = TypedFeatureSource(tables[0], _fetcher(tables, calls))
    ids = torch.randperm(table.num_nodes, generator=torch.Generator().manual_seed(0))[:400]
    rows = source.gather("paper", ids)
    assert torch.equal(rows, reference["paper"][ids])
    assert calls == [1]  # one request, to the owner of the missing rows
    remote = int((owner[ids] != 0).sum())
    missing = int((table.slot[ids] < 0).sum())
    assert missing > 0
    stats = source.take()["paper"]
    assert (stats.lookups, stats.hits) == (remote, remote - missing)
    assert source.fetched_rows == {"paper": missing}
    assert source.take()["paper"].lookups == 0


def test_a_full_cache_is_every_row_and_sends_nothing(
    store: HeteroPartitionStore, reference: dict[str, Tensor]
) -> None:
    tables = load_typed_tables(store, 1, 1.0, CPU)
    assert tables["paper"].complete
    source = TypedFeatureSource(tables)  # no way to fetch: none may be needed
    ids = torch.arange(tables["paper"].num_nodes)
    assert torch.equal(source.gather("paper", ids), reference["paper"])
    assert source.fetched_rows == {"paper": 0}
    stats = source.take()["paper"]
    assert stats.lookups == stats.hits == tables["paper"].num_remote


def test_a_holder_refuses_rows_it_does_not_own(store: HeteroPartitionStore, registry: None) -> None:
    tables = load_typed_tables(store, 0, 0.0, CPU)
    serve_tables(tables)
    owner = np.asarray(store.owner("paper"))
    other = torch.from_numpy(np.flatnonzero(owner == 1)[:3].astype(np.int64))
    with pytest.raises(ValueError, match=r"partition 0 .* 'paper' rows it does not own"):
        _serve_rows_of_type("paper", other)
    with pytest.raises(ValueError, match=r"'paper' ids outside 0\.\."):
        _serve_rows_of_type("paper", torch.tensor([owner.size]))
    with pytest.raises(KeyError, match="no features of node type 'author'"):
        _serve_rows_of_type("author", other)


def test_without_a_cache_every_missing_row_is_fetched(
    store: HeteroPartitionStore, reference: dict[str, Tensor], registry: None
) -> None:
    tables = {p: load_typed_tables(store, p, 0.0, CPU) for p in range(2)}
    assert tables[1]["paper"].num_cached == 0
    calls: list[int] = []
    source = TypedFeatureSource(tables[1], _fetcher(tables, calls))
    ids = torch.arange(tables[1]["paper"].num_nodes).flip(0)
    assert torch.equal(source.gather("paper", ids), reference["paper"][ids])
    assert source.fetched_rows == {"paper": tables[1]["paper"].num_remote}


def test_tiered_tables_under_a_budget_give_the_same_rows_and_serve_peers(
    store: HeteroPartitionStore, reference: dict[str, Tensor], registry: None
) -> None:
    """A GPU budget of a tenth of each table: the most-cited rows in the device tier, the
    rest in the host tier; gathers and the rows served to a peer equal the store's."""
    whole = {p: load_typed_tables(store, p, 0.2, CPU) for p in range(2)}
    budget = {p: sum(t.held * t.tiers.row_bytes for t in whole[p].values()) // 10 for p in (0, 1)}
    tables = {p: load_typed_tables(store, p, 0.2, CPU, device_budget=budget[p]) for p in (0, 1)}
    table = tables[0]["paper"]
    assert table.tiered
    assert 0 < table.tiers.split <= table.held // 10 + 1
    # the device tier holds the most-cited held rows
    deg = in_degrees(store, "paper")
    held = (table.slot >= 0).nonzero().squeeze(1)
    on_device = held[table.slot[held] < table.tiers.split]
    on_host = held[table.slot[held] >= table.tiers.split]
    assert int(deg[on_device].min()) >= int(deg[on_host].max())
    calls: list[int] = []
    source = TypedFeatureSource(tables[0], _fetcher(tables, calls))
    ids = torch.randperm(table.num_nodes, generator=torch.Generator().manual_seed(1))[:500]
    assert torch.equal(source.gather("paper", ids), reference["paper"][ids])
    assert calls == [1]  # the peer answered from its own tiered table
    stats = source.take()["paper"]
    slot = table.slot[ids]
    assert stats.tier_rows == int((slot >= 0).sum())
    assert stats.host_tier_rows == int((slot >= table.tiers.split).sum()) > 0


def test_a_table_without_an_owner_map_owns_a_contiguous_range() -> None:
    rows = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    table = FeatureTable(rows, torch.arange(5, 9), 10, CPU)
    assert (table.start, table.end, table.num_remote) == (5, 9, 6)
    assert torch.equal(table.local_rows(torch.tensor([8, 5])), rows[[3, 0]])
    assert torch.equal(table.owned_slots(torch.tensor([6])), torch.tensor([1]))
    with pytest.raises(ValueError, match=r"rows it does not own \(it owns \[5, 9\)\)"):
        table.owned_slots(torch.tensor([4]))
    with pytest.raises(ValueError, match="not a contiguous range; pass the owner"):
        FeatureTable(rows, torch.tensor([0, 2, 3, 4]), 10, CPU, node_type="paper")
    with pytest.raises(ValueError, match=r"'paper': 4 rows for 3 owned nodes"):
        FeatureTable(rows, torch.arange(3), 10, CPU, node_type="paper")


def test_a_one_holder_type_gathers_its_own_rows_with_no_owner_map(
    reference: dict[str, Tensor],
) -> None:
    tables = whole_tables(reference, CPU)
    assert tables["paper"].owner is None
    source = TypedFeatureSource(tables)
    ids = torch.tensor([3, 0, 3, 7])
    assert torch.equal(source.gather("paper", ids), reference["paper"][ids])
    assert source.fetched_rows == {"paper": 0}
    assert source.take()["paper"].lookups == 0


def test_a_source_without_a_layout_needs_an_owner_map() -> None:
    rows = torch.zeros(4, 2)
    table = FeatureTable(rows, torch.arange(4), 10, CPU)  # owns 4 of 10, says nothing of the rest
    with pytest.raises(ValueError, match="needs a holder layout or a table with an owner map"):
        DistributedFeatureSource(table, None, lambda h, ids: Future(), holder=0)
