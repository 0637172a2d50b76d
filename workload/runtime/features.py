"""Node features of one holder, plus remote features over RPC behind a hot-feature cache.

A *holder* is a process that holds partitions: a sampler in server-client mode, a trainer
pod in worker mode. It owns the contiguous new-id range of its partitions and keeps their
features on its device. Features of other holders' nodes are fetched over RPC from their
owner; a share (``samplers.cacheRatio``) of the remote nodes, the hottest ones, is fetched
once at start-up and kept. One table serves both: ``slot[id]`` is the row of a node's
features in ``rows`` (local rows first, cached rows after), or -1 when it must be fetched.
With a cache ratio of 1 every node has a row and a gather is one GPU kernel, no host sync.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed.rpc as rpc
from torch import Tensor
from torch.futures import Future

from distgnn_api.contract import partitions_of_holder
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.runtime import rpc_targets, shared_slots
from distgnn_workload.runtime.rpc import RpcContext, wait_remote
from distgnn_workload.runtime.rpc_targets import Target
from distgnn_workload.runtime.shared_slots import SlotReader, SlotSpec, take
from distgnn_workload.runtime.transfers import to_device

log = logging.getLogger(__name__)

FETCH_CHUNK = 1 << 18
"""Most node ids per feature RPC while filling the cache."""


@dataclass(frozen=True)
class HolderLayout:
    """Which holder owns which node ids: holder h owns ``[bounds[h], bounds[h+1])``."""

    bounds: Tensor
    """int64 [H+1] on the host."""

    @classmethod
    def from_store(cls, store: PartitionStore, num_holders: int) -> HolderLayout:
        offsets = store.meta.offsets
        parts = store.meta.num_partitions
        bounds = [
            offsets[partitions_of_holder(h, parts, num_holders)[0]] for h in range(num_holders)
        ]
        return cls(torch.tensor([*bounds, offsets[-1]], dtype=torch.int64))

    @property
    def num_holders(self) -> int:
        return int(self.bounds.numel()) - 1

    @property
    def num_nodes(self) -> int:
        return int(self.bounds[-1])

    def range_of(self, holder: int) -> tuple[int, int]:
        return int(self.bounds[holder]), int(self.bounds[holder + 1])

    def holder_of(self, ids: Tensor) -> Tensor:
        """The owning holder of each id (on the ids' device)."""
        return torch.bucketize(ids, self.bounds.to(ids.device)[1:-1], right=True)


@dataclass
class HolderData:
    """What one holder loads from the store: its features, splits and local CSR."""

    holder: int
    start: int
    end: int
    features: Tensor
    """float32 [end - start, F] on the holder's device."""
    indptr: Tensor
    """int64 CSR of the owned nodes (row i is node start + i), host memory."""
    indices: Tensor
    """Their neighbours as global ids, host memory."""
    train_ids: Tensor
    val_ids: Tensor
    test_ids: Tensor
    """Global ids of the owned nodes in each split (int64, host)."""


def _np(a: np.ndarray) -> Tensor:
    """A tensor owning a copy of a (read-only, memory-mapped) array."""
    return torch.from_numpy(np.array(a, copy=True))


def load_holder(
    store: PartitionStore,
    holder: int,
    num_holders: int,
    device: torch.device,
    feature_dtype: torch.dtype = torch.float32,
) -> HolderData:
    """Read the partitions of ``holder`` (a contiguous id range) from the store.

    ``feature_dtype`` bfloat16 halves feature memory and traffic for bf16 training.
    """
    parts = [
        store.partition(p)
        for p in partitions_of_holder(holder, store.meta.num_partitions, num_holders)
    ]
    start, end = parts[0].start, parts[-1].end
    feats = torch.cat([_np(p.features) for p in parts]) if parts else torch.zeros(0)
    indptrs, offset = [], 0
    for i, p in enumerate(parts):
        ip = _np(p.indptr).to(torch.int64)
        indptrs.append((ip if i == 0 else ip[1:]) + offset)
        offset += int(ip[-1])

    def ids(mask: str) -> Tensor:
        return torch.cat(
            [_np(np.flatnonzero(np.asarray(getattr(p, mask)))) + p.start for p in parts]
        ).to(torch.int64)

    return HolderData(
        holder=holder,
        start=start,
        end=end,
        features=feats.reshape(end - start, store.meta.num_features).to(feature_dtype).to(device),
        indptr=torch.cat(indptrs),
        indices=torch.cat([_np(p.indices) for p in parts]),
        train_ids=ids("train_mask"),
        val_ids=ids("val_mask"),
        test_ids=ids("test_mask"),
    )


def split_ids(store: PartitionStore, layout: HolderLayout, split: str) -> list[Tensor]:
    """Global ids of every holder's nodes in ``split`` (train, val or test)."""
    out = []
    for h in range(layout.num_holders):
        parts = partitions_of_holder(h, store.meta.num_partitions, layout.num_holders)
        out.append(
            torch.cat(
                [
                    _np(np.flatnonzero(np.asarray(getattr(store.partition(p), f"{split}_mask"))))
                    + store.meta.offsets[p]
                    for p in parts
                ]
            ).to(torch.int64)
        )
    return out


def load_labels(store: PartitionStore, device: torch.device) -> Tensor:
    """Labels of every node (8 bytes a node: small enough to keep whole on every holder)."""
    labels = [_np(store.partition(p).labels) for p in range(store.meta.num_partitions)]
    return torch.cat(labels).to(torch.int64).to(device)


# --------------------------------------------------------------------------- the table


class FeatureTable:
    """Local rows plus cached remote rows, addressed by a global ``slot`` map."""

    def __init__(self, data: HolderData, num_nodes: int, device: torch.device) -> None:
        self.device = device
        self.start, self.end = data.start, data.end
        self.num_nodes = num_nodes
        self.num_features = int(data.features.shape[1])
        self.rows = data.features
        self.slot = torch.full((num_nodes,), -1, dtype=torch.int32, device=device)
        self.slot[data.start : data.end] = torch.arange(
            data.end - data.start, dtype=torch.int32, device=device
        )
        self.num_cached = 0
        self._free = int(self.rows.shape[0])

    @property
    def num_remote(self) -> int:
        return self.num_nodes - (self.end - self.start)

    @property
    def complete(self) -> bool:
        """Every node has a row: gathers need no RPC and no host sync."""
        return self.num_cached >= self.num_remote

    def reserve(self, count: int) -> None:
        """Make room for ``count`` more cached rows (one allocation for the whole cache)."""
        if count > 0:
            extra = torch.empty(
                (count, self.num_features), dtype=self.rows.dtype, device=self.device
            )
            self.rows = torch.cat([self.rows, extra])
            self._free = int(self.rows.shape[0]) - count

    def add_cached(self, ids: Tensor, rows: Tensor) -> None:
        """Keep ``rows`` as the features of the remote nodes ``ids`` (after :meth:`reserve`)."""
        n = int(ids.numel())
        if n == 0:
            return
        if self._free + n > int(self.rows.shape[0]):
            self.reserve(self._free + n - int(self.rows.shape[0]))
        base = self._free
        self.rows[base : base + n] = rows.to(self.device, self.rows.dtype)
        self.slot[ids.to(self.device)] = torch.arange(
            base, base + n, dtype=torch.int32, device=self.device
        )
        self._free += n
        self.num_cached += n

    def local_rows(self, ids: Tensor) -> Tensor:
        """Features of nodes this holder owns (ids on any device)."""
        return self.rows[(ids.to(self.device) - self.start)]


# --------------------------------------------------------------------------- serving

SERVED_TABLE = Target[tuple["FeatureTable", RpcContext]]("feature table")
SERVE_OBSERVER = Target[Callable[[Tensor], None] | None]("feature request observer")


def set_serve_observer(observer: Callable[[Tensor], None] | None) -> None:
    """Call ``observer(rows)`` for every feature request this process answers (metrics)."""
    rpc_targets.register(SERVE_OBSERVER, observer)


def serve_table(table: FeatureTable, ctx: RpcContext) -> None:
    """Make this process answer other holders' feature requests from ``table``."""
    rpc_targets.register(SERVED_TABLE, (table, ctx))


def _observe(rows: Tensor) -> None:
    observer = rpc_targets.find(SERVE_OBSERVER)
    if observer is not None:
        observer(rows)


_serve_streams = threading.local()


def _serve_features(ids: Tensor) -> Tensor:
    """RPC target: the features of owned nodes ``ids``.

    With CUDA tensors over RPC the rows stay on the GPU (TensorPipe orders the send after
    the gather). With host tensors they are gathered on a side stream of this RPC thread and
    copied to pinned memory, so that the copy waits for nothing but the gather (not for the
    training kernels queued on the default stream).
    """
    table, ctx = rpc_targets.get(SERVED_TABLE)
    if table.device.type == "cuda":
        # a new RPC thread starts on GPU 0: anything it creates there (a pinned buffer,
        # a stream) would open a second context on a peer's GPU
        torch.cuda.set_device(table.device)
    if ctx.cuda or table.device.type != "cuda":
        rows = ctx.wire(table.local_rows(ids))
    else:
        stream: torch.cuda.Stream | None = getattr(_serve_streams, "stream", None)
        if stream is None:
            stream = torch.cuda.Stream(table.device)  # type: ignore[no-untyped-call]
            _serve_streams.stream = stream
        with torch.cuda.stream(stream):
            gathered = table.local_rows(to_device(ids, table.device))
            rows = torch.empty(gathered.shape, dtype=gathered.dtype, pin_memory=True)
            rows.copy_(gathered, non_blocking=True)
        stream.synchronize()
    _observe(rows)
    return rows


# --------------------------------------------------------------------------- the source


FetchFn = Callable[[int, Tensor], Future[Tensor]]
"""Start fetching the features of ``ids`` (int64, any device) from holder ``h``."""


def rpc_fetch(ctx: RpcContext, target_of_holder: Callable[[int], str]) -> FetchFn:
    """Feature requests over RPC: ids go as CUDA tensors where tensors travel on the GPU."""

    def fetch(holder: int, ids: Tensor) -> Future[Tensor]:
        if not ctx.cuda:
            ids = ids.cpu()
        fut: Future[Tensor] = rpc.rpc_async(target_of_holder(holder), _serve_features, args=(ids,))
        return fut

    return fetch


@dataclass
class FeatureStats:
    """Counts for the cache metrics, kept on the device until read."""

    lookups: Tensor
    """Remote-node look-ups."""
    misses: int = 0
    """Look-ups the cache could not serve (fetched over RPC)."""
    bytes_fetched: int = 0

    def take(self) -> tuple[int, int, int]:
        """(lookups, hits, bytes) since the last call; one host sync."""
        lookups = int(self.lookups.item())
        out = (lookups, max(lookups - self.misses, 0), self.bytes_fetched)
        self.lookups.zero_()
        self.misses = 0
        self.bytes_fetched = 0
        return out


@dataclass
class _Part:
    """One holder's share of a pending gather."""

    pos: Tensor
    """Where its rows go in ``out``."""
    fut: Future[Any]
    """Its rows, or (with a shared slot) how many rows it wrote there."""
    peer: str
    reader: SlotReader | None = None
    slot: int = -1


@dataclass
class PendingGather:
    """A gather whose remote rows are still on their way: ``wait()`` fills them in.

    ``out`` already holds the local and cached rows; ``parts`` say, per owning holder, where
    its rows go in ``out`` and how they come (over RPC, or written into a shared slot).
    """

    out: Tensor
    parts: list[_Part] = field(default_factory=list)

    def wait(self) -> Tensor:
        for part in self.parts:
            value = wait_remote(part.fut, part.peer)
            if part.reader is None:
                rows = value
            else:
                rows = take(part.reader.buffers(part.slot)["rows"][: int(value)], self.out.device)
            self.out[part.pos] = rows.to(self.out.device, self.out.dtype, non_blocking=True)
            if part.reader is not None:
                part.reader.release(part.slot)  # once the copy above has run
        self.parts = []
        return self.out


FEATURE_SLOTS = "rows"


def feature_slot_spec(rows: int, num_features: int, dtype: torch.dtype) -> SlotSpec:
    """One shared slot for up to ``rows`` feature rows."""
    return {FEATURE_SLOTS: ((rows, num_features), dtype)}


def _serve_features_into(consumer: str, slot: int, ids: Tensor) -> int:
    """RPC target: write the features of owned nodes ``ids`` into ``consumer``'s slot."""
    table, _ = rpc_targets.get(SERVED_TABLE)
    buffer = shared_slots.owner().buffers(consumer, slot)[FEATURE_SLOTS]
    n = int(ids.numel())
    if n > buffer.size(0):
        raise ValueError(f"{n} rows do not fit a slot of {buffer.size(0)}")
    if table.device.type != "cuda":
        torch.index_select(table.rows, 0, ids - table.start, out=buffer[:n])
    else:
        torch.cuda.set_device(table.device)
        stream: torch.cuda.Stream | None = getattr(_serve_streams, "stream", None)
        if stream is None:
            stream = torch.cuda.Stream(table.device)  # type: ignore[no-untyped-call]
            _serve_streams.stream = stream
        with torch.cuda.stream(stream):
            # every kernel on this stream: the gather must not read indices that another
            # stream (this thread's default one) is still copying or computing
            # pinned: a pageable copy would queue behind any pageable copy of this process,
            # e.g. the trainer's read-back of a collective that waits for this very request
            local = to_device(ids, table.device) - table.start
            torch.index_select(table.rows, 0, local, out=buffer[:n])
        stream.synchronize()  # the rows are in place before the answer
    _observe(buffer[:n])
    return n


class DistributedFeatureSource:
    """Gathers features of any nodes: local rows, cached rows, and RPC for the rest.

    Implements the loader's ``FeatureSource`` protocol (``gather``, ``num_features``).
    :meth:`start` splits a gather in two so that a pipeline can sample the next batches
    while the remote rows of this one are on their way: it takes one host sync (how many
    rows each holder must send) and sends one request per holder with only the missing ids.
    """

    def __init__(
        self,
        table: FeatureTable,
        layout: HolderLayout,
        fetch: FetchFn,
        *,
        holder: int,
        peer_name: Callable[[int], str] | None = None,
    ) -> None:
        self.table = table
        self.layout = layout
        self.fetch = fetch
        self.holder = holder
        self.peer_name = peer_name or (lambda h: f"holder {h}")
        self.device = table.device
        self.stats = FeatureStats(lookups=torch.zeros((), dtype=torch.int64, device=table.device))
        self._stats_lock = threading.Lock()
        self.readers: dict[int, SlotReader] = {}
        """Shared slots of holders on this host, by holder: their rows come through memory."""
        self.fetch_into: Callable[[int, int, Tensor], Future[int]] | None = None
        """Ask holder ``h`` to write the rows of ``ids`` into slot ``k`` of this process."""

    @property
    def num_features(self) -> int:
        return self.table.num_features

    def gather(self, node_ids: Tensor) -> Tensor:
        return self.start(node_ids).wait()

    def start(self, node_ids: Tensor) -> PendingGather:
        """Gather the rows at hand and send for the others (see :class:`PendingGather`)."""
        table = self.table
        ids = node_ids.to(self.device, torch.int64)
        if table.num_remote == 0:  # one holder owns every node
            return PendingGather(table.rows.index_select(0, ids))
        slot = table.slot[ids]
        remote = ((ids < table.start) | (ids >= table.end)).sum()
        with self._stats_lock:
            self.stats.lookups += remote
        if table.complete:
            return PendingGather(table.rows[slot.to(torch.int64)])
        out = table.rows[slot.clamp(min=0).to(torch.int64)]
        holders = self.layout.num_holders
        # misses keyed by their owner, the rest after them: one sort, one host sync
        key = torch.where(slot < 0, self.layout.holder_of(ids), holders)
        order = torch.argsort(key, stable=True)
        counts = torch.bincount(key, minlength=holders + 1).tolist()
        misses = sum(counts[:holders])
        if misses == 0:
            return PendingGather(out)
        order = order[:misses]
        miss_ids = ids[order]
        if self.readers:
            miss_ids = miss_ids.cpu()  # requests carry host ids; rows come through the slots
        pending = PendingGather(out)
        lo = 0
        for h, n in enumerate(counts[:holders]):
            if not n:
                continue
            if h == self.holder:
                raise RuntimeError(f"holder {h} has no row for some of its own nodes")
            pos = order[lo : lo + n]
            # a compact copy: a view would put its whole storage on the wire
            request = miss_ids[lo : lo + n].clone()
            reader = self.readers.get(h)
            if reader is not None and self.fetch_into is not None and n <= _slot_rows(reader):
                k = reader.acquire()
                fut: Future[Any] = self.fetch_into(h, k, request)
                pending.parts.append(_Part(pos, fut, self.peer_name(h), reader, k))
            else:
                pending.parts.append(_Part(pos, self.fetch(h, request), self.peer_name(h)))
            lo += n
        with self._stats_lock:
            self.stats.misses += misses
            self.stats.bytes_fetched += misses * table.num_features * out.element_size()
        return pending


def _slot_rows(reader: SlotReader) -> int:
    return int(reader.buffers(0)[FEATURE_SLOTS].size(0))


def rpc_fetch_into(
    me: str, target_of_holder: Callable[[int], str]
) -> Callable[[int, int, Tensor], Future[int]]:
    """Feature requests whose rows the owner writes into this process's shared slot."""

    def fetch_into(holder: int, slot: int, ids: Tensor) -> Future[int]:
        fut: Future[int] = rpc.rpc_async(
            target_of_holder(holder), _serve_features_into, args=(me, slot, ids.cpu())
        )
        return fut

    return fetch_into


def fill_cache(
    table: FeatureTable,
    layout: HolderLayout,
    fetch: FetchFn,
    hot_ids: Tensor,
    *,
    chunk: int = FETCH_CHUNK,
    peer_name: Callable[[int], str] | None = None,
) -> None:
    """Fetch the features of ``hot_ids`` (remote nodes, hottest first) into the table.

    Only other holders are asked, and only for ids they own: never this holder itself
    (a process has no RPC channel to itself), never with an empty request.
    """
    hot_ids = hot_ids.to(torch.int64).cpu()
    own = (hot_ids >= table.start) & (hot_ids < table.end)
    hot_ids = hot_ids[~own]
    owners = layout.holder_of(hot_ids)
    table.reserve(int(hot_ids.numel()))
    name = peer_name or (lambda h: f"holder {h}")
    for h in range(layout.num_holders):
        mine = hot_ids[owners == h]
        if mine.numel() == 0:
            continue
        futures = [(c, fetch(h, c.clone())) for c in torch.split(mine, chunk)]
        for ids, fut in futures:
            table.add_cached(ids, wait_remote(fut, name(h)))
    log.info(
        "feature cache: %d of %d remote nodes (%.0f%%)",
        table.num_cached,
        table.num_remote,
        100.0 * table.num_cached / max(table.num_remote, 1),
    )


def select_hot(
    counts: Tensor,
    degrees: Tensor | None,
    start: int,
    end: int,
    budget: int,
) -> Tensor:
    """The ``budget`` hottest remote nodes: by pre-sampled access count, ties by degree."""
    num_nodes = int(counts.numel())
    remote = torch.ones(num_nodes, dtype=torch.bool)
    remote[start:end] = False
    if budget >= num_nodes - (end - start):
        return remote.nonzero().squeeze(1)
    score = counts.to(torch.float64).cpu()
    if degrees is not None:
        deg = degrees.to(torch.float64).cpu()
        score = score + deg / (deg.max().clamp(min=1.0) * 2.0)
    score[~remote] = -1.0
    return torch.topk(score, budget).indices


def presample_counts(
    sample: Callable[[Tensor], Tensor],
    seeds: Tensor,
    num_nodes: int,
    *,
    batch_size: int,
    max_batches: int,
    seed: int = 0,
    device: torch.device | None = None,
) -> Tensor:
    """How often each node appears in sampled batches of ``seeds`` (GLT's hotness).

    Counted on ``device`` (where the sampler puts its ids), returned on the host.
    """
    counts = torch.zeros(num_nodes, dtype=torch.int64, device=device)
    if seeds.numel() == 0 or max_batches <= 0:
        return counts.cpu()
    g = torch.Generator()
    g.manual_seed(seed)
    order = seeds[torch.randperm(seeds.numel(), generator=g)]
    for batch in torch.split(order, batch_size)[:max_batches]:
        ids = sample(batch).to(counts.device, torch.int64)
        counts += torch.bincount(ids, minlength=num_nodes)
    return counts.cpu()
