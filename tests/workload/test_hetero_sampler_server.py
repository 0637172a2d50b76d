"""The typed sampler server in one process: what it samples, gathers and sends, and the
trainer's pipeline over it.

The same seeds on the same random stream give the same typed batch in the worker-mode
pipeline (:class:`HeteroPipeline`) and on a sampler server, whichever of the server's
threads serves it; the wire format carries the batch unchanged; the server-client pipeline
asks for each batch on a stream of its own, so an epoch's batches do not depend on the
order in which the server's threads finish them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import Tensor

from distgnn_api.hetero_load import resolve_edge_fanouts
from distgnn_api.spec import DistGNNJobSpec, parse_spec
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.loader import HeteroMiniBatch
from distgnn_workload.runtime.batches import HeteroPipeline
from distgnn_workload.runtime.lifecycle import BadInputError
from distgnn_workload.runtime.remote_batches import TypedRemotePipeline
from distgnn_workload.runtime.rpc import RemoteError
from distgnn_workload.runtime.seeds import batch_stream
from distgnn_workload.runtime.training_data import (
    HeteroTrainingData,
    contiguous_book,
    from_graph,
    open_typed_store,
)
from distgnn_workload.runtime.wire import (
    TypedWireBatch,
    feature_bytes,
    unpack_typed,
    wire_bytes,
)
from distgnn_workload.sampler.server import HeteroSamplerServer
from tests.workload.hetero_graphs import same_hop

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def data() -> HeteroTrainingData:
    graph = generate_mag(SyntheticHeteroConfig(scale=0.002, num_classes=5, seed=2))
    return from_graph(graph, contiguous_book(graph.node_counts, 2), 2)


def _spec() -> DistGNNJobSpec:
    return parse_spec(
        {
            "dataset": {"syntheticMag": {"scale": 0.002, "numClasses": 5}},
            "samplers": {"replicas": 2, "concurrency": 3},
            "trainers": {"replicas": 2, "gpusPerPod": 0},
            "model": {
                "arch": "rsage",
                "numLayers": 2,
                "fanout": [6, 3],
                "edgeFanouts": {"field_of_study__rev_has_topic__paper": [2, 1]},
            },
            "training": {"batchSize": 32},
        }
    )


def _server(data: HeteroTrainingData) -> HeteroSamplerServer:
    spec = _spec()
    return HeteroSamplerServer(
        data, spec, rank=1, device=CPU, concurrency=spec.samplers.concurrency
    )


def _seeds(data: HeteroTrainingData, n: int, offset: int = 0) -> Tensor:
    return data.train_ids[1][offset : offset + n]


def test_worker_and_server_sample_the_same_batch_on_the_same_stream(
    data: HeteroTrainingData,
) -> None:
    spec = _spec()
    fanouts = resolve_edge_fanouts(spec.model.fanout, spec.model.edge_fanouts, data.edge_types)
    local = HeteroPipeline(data, fanouts, rank=0, seed=0, device=CPU)
    server = _server(data)
    seeds = _seeds(data, 32)
    for stream in (11, 12, 13):
        local.sampler.reseed(stream)
        expected = local.batch(seeds)
        hop, x, y = unpack_typed(server.sample(seeds, stream), CPU)
        same_hop(hop, expected.hop)
        assert hop.num_edges > seeds.numel()  # it sampled a neighbourhood
        assert set(x) == set(data.x) == {"paper"}  # featured types only: no embedding rows
        assert torch.equal(x["paper"], expected.x["paper"])
        assert torch.equal(x["paper"], data.x["paper"][hop.node_ids["paper"]])
        assert torch.equal(y, data.y[seeds])
    # another stream samples another neighbourhood
    a, _, _ = unpack_typed(server.sample(seeds, 11), CPU)
    b, _, _ = unpack_typed(server.sample(seeds, 99), CPU)
    assert any(not torch.equal(a.node_ids[t], b.node_ids[t]) for t in a.node_ids)


def test_the_wire_batch_carries_int32_edges_and_counts_its_bytes(
    data: HeteroTrainingData,
) -> None:
    wire: TypedWireBatch = _server(data).sample(_seeds(data, 16), 5)
    edge_index = wire[4]
    assert {v.dtype for v in edge_index.values()} == {torch.int32}
    rows = wire[7]["paper"]
    assert feature_bytes(wire) == rows.numel() * 4
    assert wire_bytes(wire) > feature_bytes(wire)
    hop, _, _ = unpack_typed(wire, CPU)
    assert {v.dtype for v in hop.edge_index.values()} == {torch.int64}


def test_concurrent_requests_get_their_own_streams(data: HeteroTrainingData) -> None:
    server = _server(data)
    requests = [(_seeds(data, 24, 24 * i), 100 + i) for i in range(9)]
    expected = [unpack_typed(server.sample(s, k), CPU)[0] for s, k in requests]
    futures = [server.submit(s, k) for s, k in requests]  # three threads, out of order
    for fut, want in zip(futures, expected, strict=True):
        same_hop(unpack_typed(fut.wait(), CPU)[0], want)
    assert server.served == len(requests)
    assert server.seeds_served == sum(int(s.numel()) for s, _ in requests)


def test_the_remote_pipeline_asks_each_batch_on_its_own_stream(
    data: HeteroTrainingData,
) -> None:
    server = _server(data)
    asked: list[tuple[int, int]] = []

    def request(holder: int, seeds: Tensor, stream: int) -> torch.futures.Future[TypedWireBatch]:
        asked.append((holder, stream))
        return server.submit(seeds, stream)

    pipeline = TypedRemotePipeline(request, rank=1, seed=7, device=CPU, prefetch=2, concurrency=3)
    batches = [(1, _seeds(data, 20, 20 * i)) for i in range(5)]
    got: list[HeteroMiniBatch] = list(pipeline.epoch(batches, epoch=2))
    assert len(got) == 5
    assert pipeline.received == 5
    streams = [batch_stream(7, 2, 0, 1, i) for i in range(5)]
    assert asked == [(1, k) for k in streams]
    for (_, seeds), batch, k in zip(batches, got, streams, strict=True):
        assert torch.equal(batch.hop.seed_ids, seeds)
        same_hop(batch.hop, unpack_typed(server.sample(seeds, k), CPU)[0])
    # evaluations and other epochs and ranks sample other streams
    assert batch_stream(7, None, 2, 1, 0) not in streams
    assert batch_stream(7, 3, 0, 1, 0) not in streams
    assert batch_stream(7, 2, 0, 0, 0) not in streams


def test_a_failed_request_is_raised_naming_the_sampler(data: HeteroTrainingData) -> None:
    server = _server(data)
    pipeline = TypedRemotePipeline(
        lambda h, s, k: server.submit(s, k),
        rank=0,
        seed=0,
        device=CPU,
        prefetch=1,
        concurrency=1,
    )
    too_large = torch.tensor([data.node_counts["paper"] + 5])
    with pytest.raises(RemoteError, match="sampler-1"):
        list(pipeline.epoch([(1, too_large)], epoch=0))


def test_a_store_with_other_partitions_than_samplers_names_the_field(tmp_path: Path) -> None:
    from distgnn_workload.partition.writer import write_partitions

    graph = generate_mag(SyntheticHeteroConfig(scale=0.001, num_classes=4, seed=1))
    write_partitions(tmp_path / "store", graph, 2, spec=_spec().partition, key="k")
    assert open_typed_store(tmp_path / "store", 2, worker_mode=False).num_partitions == 2
    with pytest.raises(BadInputError, match=r"spec\.samplers\.replicas"):
        open_typed_store(tmp_path / "store", 3, worker_mode=False)
    with pytest.raises(BadInputError, match=r"spec\.trainers\.replicas"):
        open_typed_store(tmp_path / "store", 1, worker_mode=True)


def test_the_pool_shares_one_copy_of_the_neighbour_lists(data: HeteroTrainingData) -> None:
    server = _server(data)
    samplers = [server._slots.get().sampler for _ in range(3)]
    for et in data.edge_types:
        pointers = {s.graph.indices[et].data_ptr() for s in samplers}
        assert len(pointers) == 1, et
