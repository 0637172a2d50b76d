"""BatchLoader: every seed once per epoch, correct features/labels, background prefetch."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import Tensor

from distgnn_workload.loader import BatchLoader, LocalFeatureSource, MiniBatch, Prefetcher
from distgnn_workload.sampling import HopBatch, NeighborSampler, csc_from_edge_index

NUM_NODES = 300


def graph_and_features() -> tuple[NeighborSampler, Tensor, Tensor]:
    g = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, NUM_NODES, (2, 3000), generator=g)
    sampler = NeighborSampler(*csc_from_edge_index(edge_index, NUM_NODES), [4, 3], device="cpu")
    features = torch.randn(NUM_NODES, 8, generator=g)
    labels = torch.randint(0, 5, (NUM_NODES,), generator=g)
    return sampler, features, labels


def make_loader(prefetch: int, **kwargs: object) -> tuple[BatchLoader, Tensor, Tensor]:
    sampler, features, labels = graph_and_features()
    seeds = torch.arange(0, NUM_NODES, 2)  # 150 training seeds
    loader = BatchLoader(
        seeds,
        kwargs.pop("sampler", sampler),  # type: ignore[arg-type]
        LocalFeatureSource(features, labels, "cpu"),
        kwargs.pop("labels", labels),  # type: ignore[arg-type]
        kwargs.pop("batch_size", 32),  # type: ignore[arg-type]
        shuffle=True,
        prefetch=prefetch,
        device="cpu",
        **kwargs,  # type: ignore[arg-type]
    )
    return loader, features, labels


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_epoch_covers_every_seed_once_with_right_features(prefetch: int) -> None:
    loader, features, labels = make_loader(prefetch)
    assert len(loader) == 5
    seen: list[int] = []
    for batch in loader:
        assert isinstance(batch, MiniBatch)
        seeds = batch.hop.seed_ids
        seen.extend(seeds.tolist())
        assert torch.equal(batch.x, features[batch.hop.node_ids])
        assert torch.equal(batch.y, labels[seeds])
    assert sorted(seen) == list(range(0, NUM_NODES, 2))
    assert len(loader.data_wait_s) == 5
    assert all(w >= 0 for w in loader.data_wait_s)


def test_epochs_reshuffle_and_set_epoch_repeats() -> None:
    loader, _, _ = make_loader(2)
    first = [b.hop.seed_ids.tolist() for b in loader]
    second = [b.hop.seed_ids.tolist() for b in loader]
    assert first != second
    loader.set_epoch(0)
    assert [b.hop.seed_ids.tolist() for b in loader] == first


def test_drop_last_and_label_function() -> None:
    loader, _, _ = make_loader(1, drop_last=True, labels=lambda ids: -ids)
    batches = list(loader)
    assert len(loader) == len(batches) == 4
    assert all(b.num_seeds == 32 for b in batches)
    assert all(torch.equal(b.y, -b.hop.seed_ids) for b in batches)


class RecordingSampler:
    """Wraps a sampler; records the thread of each call; can fail at a given call."""

    def __init__(self, inner: NeighborSampler, fail_at: int = -1) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.threads: list[str] = []
        self.third_call = threading.Event()

    def sample(self, seeds: Tensor) -> HopBatch:
        self.threads.append(threading.current_thread().name)
        if len(self.threads) == 3:
            self.third_call.set()
        if len(self.threads) - 1 == self.fail_at:
            raise RuntimeError("sampler broke")
        return self.inner.sample(seeds)


def test_prefetch_runs_ahead_in_background_and_stops_on_break() -> None:
    sampler, _, _ = graph_and_features()
    recording = RecordingSampler(sampler)
    loader, _, _ = make_loader(2, sampler=recording)
    for _ in loader:
        # while the consumer holds batch 0, the producer fills the queue with batches 1, 2
        assert recording.third_call.wait(timeout=30)
        break
    assert all(name == "distgnn-prefetch" for name in recording.threads)
    assert not any(t.name == "distgnn-prefetch" for t in threading.enumerate())
    assert len(recording.threads) < len(loader)


def test_producer_error_reaches_consumer() -> None:
    sampler, _, _ = graph_and_features()
    loader, _, _ = make_loader(2, sampler=RecordingSampler(sampler, fail_at=2))
    batches = iter(loader)
    next(batches)
    next(batches)
    with pytest.raises(RuntimeError, match="sampler broke"):
        next(batches)


@pytest.mark.parametrize("depth", [0, 2])
@pytest.mark.parametrize("count", [0, 3])
def test_finish_runs_once_where_items_are_produced_after_the_last(depth: int, count: int) -> None:
    """The feature exchange ends its phase there: after every item, also when there are none."""
    events: list[tuple[str, int | None, str]] = []

    def produce(i: int) -> int:
        events.append(("produce", i, threading.current_thread().name))
        return i

    def finish() -> None:
        events.append(("finish", None, threading.current_thread().name))

    got = list(Prefetcher(produce, count, depth=depth, device=torch.device("cpu"), finish=finish))
    assert got == list(range(count))
    assert [e[:2] for e in events] == [("produce", i) for i in range(count)] + [("finish", None)]
    assert len({e[2] for e in events}) == 1  # the producing thread runs it
    if depth:
        assert events[-1][2] == "distgnn-prefetch"


def test_local_feature_source_dtype_and_label_check() -> None:
    features = torch.randn(10, 4)
    source = LocalFeatureSource(features, None, "cpu", dtype=torch.bfloat16)
    assert source.num_features == 4
    out = source.gather(torch.tensor([3, 1]))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), features[[3, 1]], rtol=1e-2, atol=1e-2)
    with pytest.raises(ValueError, match="labels has 9 rows"):
        LocalFeatureSource(features, torch.zeros(9), "cpu")
    with pytest.raises(ValueError, match="without labels"):
        source.gather_labels(torch.tensor([0]))


@pytest.mark.gpu
def test_gpu_loader_side_stream() -> None:
    sampler, features, labels = graph_and_features()
    gpu_sampler = NeighborSampler(sampler.indptr, sampler.indices, [4, 3], device="cuda")
    loader = BatchLoader(
        torch.arange(NUM_NODES),
        gpu_sampler,
        LocalFeatureSource(features, labels, "cuda"),
        labels.cuda(),
        64,
        shuffle=True,
        prefetch=2,
        device="cuda",
    )
    seen = []
    for batch in loader:
        assert batch.x.is_cuda
        assert torch.equal(batch.x.cpu(), features[batch.hop.node_ids.cpu()])
        seen.extend(batch.hop.seed_ids.tolist())
    assert sorted(seen) == list(range(NUM_NODES))
    waits = loader.gpu_data_wait_s()
    assert len(waits) == len(loader.data_wait_s) == len(loader)
    assert all(w >= 0 for w in waits)
