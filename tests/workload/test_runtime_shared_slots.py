"""Shared slots: bulk data through memory that a producer and a consumer process both map.

Here the two sides live in one process but share the memory through the same files a
second process would map; real processes are covered by the e2e jobs (server-client and
worker mode use the slots on one host).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor
from torch.futures import Future

from distgnn_workload.partition import write_partitions
from distgnn_workload.runtime import shared_slots
from distgnn_workload.runtime.features.layout import HolderLayout, load_holder
from distgnn_workload.runtime.features.remote import DistributedFeatureSource
from distgnn_workload.runtime.features.serving import (
    _serve_features_into,
    feature_slot_spec,
    serve_table,
)
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.rpc import RpcContext
from distgnn_workload.runtime.shared_slots import SlotOwner, SlotReader, host_id
from distgnn_workload.runtime.wire import (
    batch_slot_spec,
    pack,
    pack_into,
    unpack,
    unpack_from,
)
from distgnn_workload.sampling import NeighborSampler, StaticLayout, csc_from_edge_index
from tests.support.random_graph import random_graph

CPU = torch.device("cpu")


def _attach(owner: SlotOwner, spec: shared_slots.SlotSpec, count: int) -> SlotReader:
    def call(me: str, host: str, request: Any, n: int) -> Any:
        assert host == host_id()
        return owner.open(me, {name: (shape, dtype) for name, shape, dtype in request}, n)

    reader = SlotReader.attach("producer", "consumer", spec, count, CPU, call=call)
    assert reader is not None
    return reader


def test_what_the_producer_writes_the_consumer_reads_through_separate_mappings() -> None:
    owner = SlotOwner(CPU, f"test-{time.time_ns()}")
    spec = {"a": ((4, 3), torch.float32), "b": ((5,), torch.int64)}
    reader = _attach(owner, spec, 2)
    try:
        mine = owner.buffers("consumer", 1)
        mine["a"].copy_(torch.arange(12.0).reshape(4, 3))
        mine["b"].fill_(7)
        seen = reader.buffers(1)
        assert seen["a"].data_ptr() != mine["a"].data_ptr()  # a mapping of its own
        assert torch.equal(seen["a"], torch.arange(12.0).reshape(4, 3))
        assert torch.equal(seen["b"], torch.full((5,), 7))
        assert torch.equal(reader.buffers(0)["a"], torch.zeros(4, 3))
    finally:
        owner.close()


def test_slots_are_handed_out_once_until_released() -> None:
    owner = SlotOwner(CPU, f"test-{time.time_ns()}")
    reader = _attach(owner, {"a": ((2,), torch.float32)}, 3)
    try:
        got = [reader.acquire() for _ in range(3)]
        assert sorted(got) == [0, 1, 2]
        later: list[int] = []
        waiter = threading.Thread(target=lambda: later.append(reader.acquire()))
        waiter.start()
        time.sleep(0.05)
        assert later == []  # every slot is taken: it waits
        reader.release(got[1])
        waiter.join(timeout=5)
        assert later == [got[1]]
    finally:
        owner.close()


def test_a_producer_on_another_host_gives_no_slots() -> None:
    reader = SlotReader.attach(
        "producer", "consumer", {"a": ((2,), torch.float32)}, 2, CPU, call=lambda *a: None
    )
    assert reader is None


def _hop_batch() -> tuple[Any, Tensor, Tensor]:
    g = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 300, (2, 2000), generator=g)
    indptr, indices = csc_from_edge_index(edge_index, 300)
    hop = NeighborSampler(indptr, indices, [4, 3], device="cpu").sample(torch.arange(0, 150, 7))
    x = torch.randn(hop.num_nodes, 5, generator=g)
    y = torch.randint(0, 3, (hop.num_seeds,), generator=g)
    return hop, x, y


def test_a_mini_batch_read_from_a_slot_equals_the_one_sent_over_rpc() -> None:
    hop, x, y = _hop_batch()
    layout = StaticLayout(32, (4, 3))
    owner = SlotOwner(CPU, f"test-{time.time_ns()}")
    reader = _attach(owner, batch_slot_spec(layout, 5, torch.float32), 2)
    try:
        meta = pack_into(hop, x, y, owner.buffers("consumer", 0))
        got = unpack_from(meta, reader.buffers(0), CPU)
        want = unpack(pack(hop, x, y, lambda t: t), CPU)
        for name in ("node_ids", "edge_index", "target_ptr"):
            assert torch.equal(getattr(got.hop, name), getattr(want.hop, name)), name
        assert got.hop.num_nodes_per_hop == want.hop.num_nodes_per_hop
        assert got.hop.num_edges_per_hop == want.hop.num_edges_per_hop
        assert torch.equal(got.x, x)
        assert torch.equal(got.y, y)
        owner.buffers("consumer", 0)["x"].zero_()  # the slot's next batch
        assert torch.equal(got.x, x), "the consumer holds a copy, not the slot"
        with pytest.raises(ValueError, match="exceeds its slot"):
            pack_into(hop, x, y, owner.buffers("consumer", 1) | {"node_ids": torch.zeros(3)})
    finally:
        owner.close()


def test_remote_rows_come_through_the_owners_slots(tmp_path: Any) -> None:
    n = 200
    graph = random_graph(n, 900, 4, seed=0, cuts=(0.6, 0.8))
    store = write_partitions(tmp_path / "p", graph, 2, assignment=np.arange(n) % 2)
    layout = HolderLayout.from_store(store, 2)
    reference = torch.from_numpy(np.concatenate([store.partition(p).features for p in range(2)]))
    owner_data = load_holder(store, 1, 2, CPU)
    owner = SlotOwner(CPU, f"test-{time.time_ns()}")
    shared_slots.serve_slots(owner)
    serve_table(FeatureTable.for_holder(owner_data, n, CPU), RpcContext(None, CPU, cuda=False))  # type: ignore[arg-type]
    try:
        mine = load_holder(store, 0, 2, CPU)
        source = DistributedFeatureSource(
            FeatureTable.for_holder(mine, n, CPU), layout, lambda h, ids: Future(), holder=0
        )
        reader = _attach(owner, feature_slot_spec(64, 4, torch.float32), 2)
        source.readers[1] = reader
        asked: list[int] = []

        def fetch_into(holder: int, slot: int, ids: Tensor) -> Future[int]:
            asked.append(slot)
            fut: Future[int] = Future()
            fut.set_result(_serve_features_into("consumer", slot, ids))
            return fut

        source.fetch_into = fetch_into
        for _ in range(3):  # more gathers than slots: each slot comes back after its copy
            ids = torch.randperm(n)[:60]
            assert torch.equal(source.gather(ids), reference[ids])
        assert sorted(set(asked)) == [0, 1]
        assert reader.acquire() in (0, 1)
    finally:
        owner.close()
