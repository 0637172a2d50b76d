"""Neighbour sampling for a holder: on a replicated topology, or hop by hop over RPC.

When the whole topology fits (``samplers.replicateTopology``: ``always``, or ``auto`` and it
fits in memory), each holder keeps the full CSR and samples locally with the
:class:`~distgnn_workload.sampling.NeighborSampler`; only features cross the network.
Otherwise a holder keeps only its own partitions' CSR and samples each hop of a frontier
locally for the nodes it owns and with one RPC per owning holder for the rest.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
import torch.distributed.rpc as rpc
from torch import Tensor
from torch.futures import Future

from distgnn_api.spec import ReplicateTopology
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.pinned_copies import to_device
from distgnn_workload.runtime import rpc_targets
from distgnn_workload.runtime.features.layout import HolderData, HolderLayout, group_by_key
from distgnn_workload.runtime.rpc import RpcContext
from distgnn_workload.runtime.rpc_targets import Target
from distgnn_workload.runtime.transfers import thread_stream
from distgnn_workload.sampling import NeighborSampler

log = logging.getLogger(__name__)

FITS_SHARE = 0.5
"""Replicate the topology (auto) when it takes at most this share of the free memory."""


def topology_bytes(store: PartitionStore) -> int:
    indptr, indices = store.topology()
    return int(indptr.nbytes + indices.nbytes)


def free_memory(device: torch.device) -> int:
    """Free bytes on the device: GPU memory, or host memory within the container's limit."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    available = _meminfo_available()
    limit = _cgroup_free()
    return min(available, limit) if limit is not None else available


def _meminfo_available() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def _cgroup_free() -> int | None:
    try:
        raw = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if raw == "max":
            return None
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        return max(int(raw) - used, 0)
    except (OSError, ValueError):
        return None


def should_replicate(policy: ReplicateTopology, needed: int, device: torch.device) -> bool:
    """Whether to keep the full topology on this holder."""
    if policy is ReplicateTopology.auto:
        free = free_memory(device)
        replicate = needed <= FITS_SHARE * free
        why = f"auto: topology {needed / 2**20:.1f} MiB, free {free / 2**20:.1f} MiB on {device}"
    else:
        replicate = policy is ReplicateTopology.always
        why = f"replicateTopology {policy.value}"
    log.info("%s: %s", why, "replicating the topology" if replicate else "sampling hop by hop")
    return replicate


SamplerFactory = Callable[[int], NeighborSampler]
"""A new sampler (one per thread: a sampler is not thread-safe) with the given seed."""


def replicated_factory(
    store: PartitionStore, fanouts: list[int], device: torch.device
) -> SamplerFactory:
    """Samplers over the full topology, sharing one copy of it on ``device``."""
    indptr_np, indices_np = store.topology()
    indptr = torch.from_numpy(np.array(indptr_np, copy=True)).to(device, torch.int64)
    dtype = torch.int32 if int(indptr.numel()) - 1 <= 2**31 - 1 else torch.int64
    indices = torch.from_numpy(np.array(indices_np, copy=True)).to(device, dtype)

    def make(seed: int) -> NeighborSampler:
        return NeighborSampler(indptr, indices, fanouts, device=device, seed=seed)

    return make


# --------------------------------------------------------------------------- hop by hop

LOCAL_CSR = Target[tuple[HolderData, RpcContext, list[int], torch.device]](
    "owned partitions' CSR (hop-by-hop sampling)"
)
_threads = threading.local()


def serve_local_csr(data: HolderData, ctx: RpcContext, fanouts: list[int]) -> None:
    """Answer other holders' one-hop requests for the nodes this holder owns."""
    rpc_targets.register(LOCAL_CSR, (data, ctx, fanouts, ctx.device))


def _owned_sampler(
    data: HolderData, fanouts: list[int], device: torch.device, seed: int
) -> NeighborSampler:
    """A dynamic-shape sampler over the CSR of the nodes this holder owns."""
    return NeighborSampler(
        data.indptr.to(device),
        data.indices.to(device),
        fanouts,
        device=device,
        seed=seed,
        static_shapes=False,
    )


def _thread_local_sampler(
    data: HolderData, fanouts: list[int], device: torch.device
) -> NeighborSampler:
    sampler: NeighborSampler | None = getattr(_threads, "hop_sampler", None)
    if sampler is None:
        seed = (threading.get_ident() * 2654435761 + os.getpid()) % (2**31)
        sampler = _owned_sampler(data, fanouts, device, seed)
        _threads.hop_sampler = sampler
    return sampler


def _serve_hop(nodes: Tensor, fanout: int) -> tuple[Tensor, Tensor]:
    """RPC target: (neighbour counts, sampled neighbours in node order) of owned ``nodes``."""
    data, ctx, fanouts, device = rpc_targets.get(LOCAL_CSR)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # not GPU 0, where a new RPC thread starts
    sampler = _thread_local_sampler(data, fanouts, device)
    with (
        torch.cuda.stream(thread_stream(_threads, device))
        if device.type == "cuda"
        else nullcontext()
    ):
        local = to_device(nodes, device) - data.start
        _, neighbours, counts = sampler._sample_hop(local, fanout)
        return ctx.wire(counts), ctx.wire(neighbours)


HopFetch = Callable[[int, Tensor, int], Future[tuple[Tensor, Tensor]]]


def rpc_hop_fetch(target_of_holder: Callable[[int], str]) -> HopFetch:
    def fetch(holder: int, nodes: Tensor, fanout: int) -> Future[tuple[Tensor, Tensor]]:
        fut: Future[tuple[Tensor, Tensor]] = rpc.rpc_async(
            target_of_holder(holder), _serve_hop, args=(nodes, fanout)
        )
        return fut

    return fetch


class HopByHopSampler(NeighborSampler):
    """A NeighborSampler whose hops sample owned nodes locally and other nodes over RPC.

    It reuses the parent's relabelling and hop layout; only the one-hop step differs.
    """

    def __init__(
        self,
        data: HolderData,
        layout: HolderLayout,
        fanouts: list[int],
        fetch: HopFetch,
        *,
        device: torch.device,
        seed: int = 0,
    ) -> None:
        # The parent's relabelling and hop layout over all N global ids, with an empty CSR:
        # every hop goes through _sample_hop below (the dynamic execution).
        super().__init__(
            torch.zeros(layout.num_nodes + 1, dtype=torch.int64),
            torch.zeros(0, dtype=torch.int32),
            fanouts,
            device=device,
            seed=seed,
            static_shapes=False,
        )
        self._part = _owned_sampler(data, fanouts, device, seed)
        self._layout = layout
        self._holder = data.holder
        self._start = data.start
        self._fetch = fetch

    def _sample_hop(self, frontier: Tensor, fanout: int) -> tuple[Tensor, Tensor, Tensor]:
        device = self.device
        size = int(frontier.numel())
        order, per_holder_t = group_by_key(
            self._layout.holder_of(frontier), self._layout.num_holders
        )
        per_holder = per_holder_t.tolist()
        parts: list[tuple[Tensor, Tensor, Tensor]] = []
        pending: list[tuple[Tensor, Future[tuple[Tensor, Tensor]]]] = []
        lo = 0
        for h, n in enumerate(per_holder):
            if not n:
                continue
            pos = order[lo : lo + n]
            lo += n
            nodes = frontier[pos]
            if h == self._holder:
                _, nbrs, counts = self._part._sample_hop(nodes - self._start, fanout)
                parts.append((pos, counts, nbrs))
            else:
                pending.append((pos, self._fetch(h, nodes.cpu(), fanout)))
        for pos, fut in pending:
            counts, nbrs = fut.wait()
            parts.append((pos, counts.to(device), nbrs.to(device, torch.int64)))
        counts_all = torch.zeros(size, dtype=torch.int64, device=device)
        for pos, counts, _ in parts:
            counts_all[pos] = counts.to(torch.int64)
        starts = torch.cumsum(counts_all, 0) - counts_all
        total = int(counts_all.sum())
        neighbours = torch.empty(total, dtype=torch.int64, device=device)
        for pos, counts, nbrs in parts:
            counts = counts.to(torch.int64)
            n = int(nbrs.numel())
            first = torch.cumsum(counts, 0) - counts
            within = torch.arange(n, device=device) - torch.repeat_interleave(
                first, counts, output_size=n
            )
            dest = torch.repeat_interleave(starts[pos], counts, output_size=n) + within
            neighbours[dest] = nbrs.to(torch.int64)
        rows = torch.repeat_interleave(
            torch.arange(size, device=device), counts_all, output_size=total
        )
        return rows, neighbours, counts_all
