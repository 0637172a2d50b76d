"""A feature table over its GPU budget: the hottest rows in the device tier, the rest in the
pinned host tier, and every gather equal, exactly, to the all-in-memory table.

On CPU both tiers are host tensors and the same slots and masks are exercised; the GPU tests
(device machine only) also check that a gather copies nothing of the table to the device.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import Tensor
from torch.futures import Future

from distgnn_api.feature_memory import (
    AUTO_RESERVE_MIN,
    HOST_ROW_ALIGN,
    feature_budget,
    table_split,
)
from distgnn_workload.partition import PartitionStore, write_partitions
from distgnn_workload.runtime.features.cache_policy import fill_cache
from distgnn_workload.runtime.features.layout import HolderLayout, load_holder
from distgnn_workload.runtime.features.remote import DistributedFeatureSource
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.features.tiers import new_host_rows
from tests.support.futures import done
from tests.support.random_graph import random_graph

CPU = torch.device("cpu")
NODES, FEATURES = 400, 6
ROW_BYTES = FEATURES * 4


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> PartitionStore:
    path: Path = tmp_path_factory.mktemp("store") / "p"
    return write_partitions(
        path, random_graph(NODES, 2000, FEATURES, seed=5), 2, assignment=np.arange(NODES) % 2
    )


@pytest.fixture(scope="module")
def reference(store: PartitionStore) -> Tensor:
    return torch.from_numpy(np.concatenate([store.partition(p).features for p in range(2)]))


def _fetch(reference: Tensor) -> object:
    def fetch(holder: int, ids: Tensor) -> Future[Tensor]:
        return done(reference[ids.cpu()].clone())

    return fetch


def _tiered(
    store: PartitionStore, reference: Tensor, device: torch.device, gpu_rows: int
) -> tuple[FeatureTable, DistributedFeatureSource, Tensor]:
    """Holder 0 of 2 with half the remote rows cached and ``gpu_rows`` rows on the device,
    placed by a hotness that puts the highest ids first."""
    layout = HolderLayout.from_store(store, 2)
    data = load_holder(store, 0, 2, CPU)
    owned = data.end - data.start
    cached = (NODES - owned) // 2
    table = FeatureTable.for_holder(
        data, NODES, device, device_budget=gpu_rows * ROW_BYTES, capacity=owned + cached
    )
    assert table.tiered
    fetch = _fetch(reference)
    fill_cache(table, layout, fetch, torch.arange(data.end, data.end + cached))  # type: ignore[arg-type]
    hotness = torch.arange(NODES, dtype=torch.int64)
    table.place(hotness)
    source = DistributedFeatureSource(table, layout, fetch, holder=0)  # type: ignore[arg-type]
    return table, source, hotness


def test_a_budget_that_forces_the_split_gives_the_all_in_memory_rows(
    store: PartitionStore, reference: Tensor
) -> None:
    table, source, hotness = _tiered(store, reference, CPU, gpu_rows=50)
    held = table.end - table.start + table.num_cached
    assert table.device_rows == 50
    assert table.host_rows == held - 50
    ids = torch.randint(0, NODES, (2000,), generator=torch.Generator().manual_seed(1))
    assert torch.equal(source.gather(ids), reference[ids])
    own = torch.arange(table.start, table.end)
    assert torch.equal(table.local_rows(own), reference[own])
    # the 50 hottest held rows are the device tier's
    held_ids = torch.cat([own, torch.arange(table.end, table.end + table.num_cached)])
    hot = held_ids[torch.topk(hotness[held_ids].double(), 50).indices]
    assert bool((table.slot[hot] < 50).all())
    assert int((table.slot[held_ids] < 50).sum()) == 50
    gathered, host = source.stats.take_tiers()
    assert gathered == int((table.slot[ids] >= 0).sum())
    assert host == int((table.slot[ids] >= 50).sum()) > 0


def test_a_zero_budget_reads_every_row_from_the_host_tier(
    store: PartitionStore, reference: Tensor
) -> None:
    table, source, _ = _tiered(store, reference, CPU, gpu_rows=0)
    assert table.device_rows == 0
    ids = torch.arange(NODES)
    assert torch.equal(source.gather(ids), reference[ids])


def test_a_budget_the_table_fits_keeps_one_tier(store: PartitionStore) -> None:
    data = load_holder(store, 0, 2, CPU)
    table = FeatureTable.for_holder(data, NODES, CPU, device_budget=NODES * ROW_BYTES)
    assert not table.tiered
    assert table.host_rows == 0


def test_feature_budget_reads_quantities_and_auto() -> None:
    gib = 1 << 30
    assert feature_budget(None, 10 * gib, 80 * gib) is None
    assert feature_budget("2Gi", 10 * gib, 80 * gib) == 2 * gib
    assert feature_budget("auto", 70 * gib, 80 * gib, other=5 * gib) == 45 * gib
    assert feature_budget("auto", 10 * gib, 16 * gib) == 10 * gib - AUTO_RESERVE_MIN
    assert feature_budget("auto", 1 * gib, 16 * gib) == 0
    assert table_split(None, 10, 10) == (100, 0)
    assert table_split(200, 10, 10) == (100, 0)
    assert table_split(25, 10, 10) == (20, 10 * 128)  # whole rows; host rows padded
    assert table_split(400, 10, 200) == (400, 10 * 256)


@pytest.mark.parametrize(
    ("features", "dtype", "stride"),
    [(100, torch.bfloat16, 128), (64, torch.float32, 64), (5, torch.float32, 32)],
)
def test_host_rows_start_at_128_byte_boundaries(
    features: int, dtype: torch.dtype, stride: int
) -> None:
    base, rows = new_host_rows(7, features, dtype)
    assert rows.shape == (7, features)
    assert rows.stride(0) == stride
    assert rows.data_ptr() % HOST_ROW_ALIGN == 0
    assert rows.stride(0) * rows.element_size() % HOST_ROW_ALIGN == 0
    assert rows.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()


@pytest.mark.gpu
def test_on_the_gpu_a_tiered_gather_reads_host_rows_in_place(
    store: PartitionStore, reference: Tensor
) -> None:
    """No host-to-device copy of the table during gathers (torch.profiler), and the rows are
    those of the all-in-memory table."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from torch.profiler import ProfilerActivity, profile

    device = torch.device("cuda", 0)
    table, source, _ = _tiered(store, reference, device, gpu_rows=60)
    assert table.device_rows == 60
    assert table.host_rows > 0
    assert table.tiers.host_rows is not None
    assert table.tiers.host_rows.is_pinned()
    ids = torch.randint(0, NODES, (4000,), generator=torch.Generator().manual_seed(2)).to(device)
    ref = reference.to(device)
    own = ids[(ids >= table.start) & (ids < table.end)]
    slot = table.slot[ids].clamp(min=0)
    table.gather(slot)  # warm: Triton compiles its kernel
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            out = table.local_rows(own)
            rows = table.gather(slot)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    copies = [n for n in names if "memcpy" in n.lower() or "HtoD" in n]
    assert copies == [], copies  # nothing staged: the kernel reads the host tier in place
    assert any("tiered_gather" in n for n in names), sorted(set(names))[:40]
    hit = table.slot[ids] >= 0
    assert torch.equal(rows[hit], ref[ids[hit]])
    assert torch.equal(out, ref[own])
    assert torch.equal(source.gather(ids), ref[ids])
