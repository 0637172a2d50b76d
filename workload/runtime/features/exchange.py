"""Remote feature rows over collectives: counts, then ids, then rows (worker mode).

Every trainer takes part in every *round* of the exchange, on a process group of its own
(NCCL on GPUs, gloo on CPU) and, on a GPU, a CUDA stream of its own:

1. the counts: each rank all-gathers a row of how many ids it asks of every rank, plus a
   *done* flag, so that every rank sees the whole matrix (one host sync: the sizes);
2. the ids, with ``all_to_all_single`` (skipped, on every rank alike, when nobody asks);
3. the rows: each rank gathers the rows asked of it from its own table on the device and
   returns them with ``all_to_all_single``, asynchronously: :meth:`PendingRows.wait` makes
   the consumer's stream wait for them, so that the rows of batch n+1 travel while batch n
   trains.

A loader starts its rounds with :meth:`FeatureExchange.start_round`: they run on a thread of
their own (:class:`~distgnn_workload.runtime.features.exchange_worker.OrderedWorker`), one
after the other in the order they were started, so that the loader samples the next
batches while a round waits for the peers' counts.

A *phase* (a training epoch, an evaluation, the cache fill) is a sequence of rounds that
ends, on every rank at once, after the first round in which every rank set *done*. A rank
with fewer batches than its peers keeps answering their requests with empty rounds of its
own (:meth:`FeatureExchange.finish_phase`), so that every rank issues the same collectives
in the same order and none can wait for ever; a lost peer fails the round within the
group's timeout (at once with gloo, whose sockets close).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import Tensor

from distgnn_workload.runtime.features.exchange_worker import OrderedWorker
from distgnn_workload.runtime.features.layout import HolderLayout, group_by_key
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.transfers import wait_for_event

FILL_CHUNK = 1 << 18
"""Most ids a rank asks for in one round while filling the hot-feature cache."""


def new_exchange_group(device: torch.device, timeout_s: float) -> dist.ProcessGroup:
    """The exchange's own process group over every trainer (a collective call: every
    trainer makes it, in the same order as its other groups)."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    group = dist.new_group(backend=backend, timeout=timedelta(seconds=timeout_s))
    if not isinstance(group, dist.ProcessGroup):
        raise RuntimeError("this process is not a member of the feature exchange's group")
    return group


@dataclass
class ExchangeBytes:
    """What this rank moved (host counters, no sync)."""

    rows_in: int = 0
    """Feature rows received, in bytes."""
    rows_out: int = 0
    """Feature rows sent to peers, in bytes."""
    ids: int = 0
    """Ids sent and received, in bytes."""
    rounds: int = 0

    @property
    def total_in(self) -> int:
        """Bytes this rank pulled: the rows it received and the ids it sent."""
        return self.rows_in + self.ids


@dataclass
class PendingRows:
    """The rows of one round, on their way: :meth:`wait` hands them to the current stream."""

    rows: Tensor
    """``[requested, F]``, ordered by owner as the request was."""
    work: dist.Work | None = None
    done: torch.cuda.Event | None = None

    def wait(self) -> Tensor:
        if self.done is not None:
            current = torch.cuda.current_stream(self.rows.device)
            current.wait_event(self.done)
            self.rows.record_stream(current)
        elif self.work is not None:
            self.work.wait()
        self.done, self.work = None, None
        return self.rows


@dataclass
class FeatureExchange:
    """The rounds of one trainer against the others (see the module's docstring).

    ``rank_of_holder[h]``: the rank this rank asks for the rows of holder ``h`` (the process
    of that pod with this process's local rank). ``layout``: the holders' id ranges, or None
    where the table's owner map says who owns a row (a typed job's tables; one exchange
    per featured node type, each on a group of its own).
    """

    table: FeatureTable
    layout: HolderLayout | None
    group: dist.ProcessGroup
    rank: int
    world_size: int
    rank_of_holder: list[int]
    timeout_s: float
    moved: ExchangeBytes = field(default_factory=ExchangeBytes)

    def __post_init__(self) -> None:
        if self.layout is None and self.table.owner is None:
            raise ValueError(
                "the feature exchange needs a holder layout or a table with an owner map"
            )
        self.device = self.table.device
        self.cuda = self.device.type == "cuda"
        self.num_holders = len(self.rank_of_holder)
        self.stream: torch.cuda.Stream | None = (
            torch.cuda.Stream(self.device) if self.cuda else None  # type: ignore[no-untyped-call]
        )
        self.row_bytes = self.table.num_features * torch.finfo(self.table.dtype).bits // 8
        self._ranks_of_holders = torch.tensor(self.rank_of_holder, device=self.device)
        # the host side of the counts read-back: pinned, so that the copy waits for the
        # all-gather only (never queues behind another thread's pageable copy)
        self._counts_host = torch.empty(
            (self.world_size, self.world_size + 1), dtype=torch.int64, pin_memory=self.cuda
        )
        self._worker: OrderedWorker | None = None
        """Runs the rounds a loader starts (made with the first)."""

    @classmethod
    def on_new_group(
        cls,
        table: FeatureTable,
        layout: HolderLayout | None,
        rank_of_holder: list[int],
        timeout_s: float,
    ) -> FeatureExchange:
        """An exchange of ``table``'s rows on a new process group over every rank of the
        default one (:func:`new_exchange_group`: a collective call, made by every rank in
        the same order as its other groups)."""
        group = new_exchange_group(table.device, timeout_s)
        return cls(
            table,
            layout,
            group,
            rank=dist.get_rank(group),
            world_size=dist.get_world_size(group),
            rank_of_holder=rank_of_holder,
            timeout_s=timeout_s,
        )

    # ------------------------------------------------------------------ agreement

    def any_rank(self, flag: bool) -> bool:
        """True when ``flag`` holds on some rank (a collective of the exchange's group)."""
        t = torch.tensor([1 if flag else 0], dtype=torch.int64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        return bool(self._read(t)[0].item())

    # ------------------------------------------------------------------ one round

    def start_round(self, ids: Tensor, counts: Tensor) -> Future[tuple[PendingRows, bool]]:
        """:meth:`round` (not done) on the exchange's thread, after every round started
        before it; the caller goes on at once. ``ids`` and ``counts`` are read once the work
        queued so far on the caller's stream has run."""
        ready = None
        if self.cuda:
            ready = torch.cuda.Event()  # type: ignore[no-untyped-call]
            ready.record(torch.cuda.current_stream(self.device))
        return self._thread().submit(lambda: self.round(ids, counts, done=False, ready=ready))

    def _thread(self) -> OrderedWorker:
        if self._worker is None:
            self._worker = OrderedWorker(f"distgnn-exchange-{self.rank}", self.device)
        return self._worker

    def round(
        self, ids: Tensor, counts: Tensor, *, done: bool, ready: torch.cuda.Event | None = None
    ) -> tuple[PendingRows, bool]:
        """Ask the owners for rows and answer the peers' requests; one host sync.

        ``counts`` (int64 ``[holders]``, on the device): how many rows to ask of each holder;
        ``ids`` (int64, on the device): sorted by owning holder, the first ``counts.sum()`` of
        them asked for (any after them are not). ``ready``: an event after which they are
        made (by default: the work queued so far on the calling thread's stream). Returns
        the rows on their way (as many as were asked for, in the order of ``ids``) and
        whether every rank set ``done``.
        """
        producer = torch.cuda.current_stream(self.device) if self.cuda else None
        with torch.cuda.stream(self.stream) if self.stream is not None else nullcontext():
            if self.stream is not None and producer is not None:
                # the ids and counts were computed on the producer's stream
                if ready is not None:
                    self.stream.wait_event(ready)
                else:
                    self.stream.wait_stream(producer)
                ids.record_stream(self.stream)
                counts.record_stream(self.stream)
            mine = torch.zeros(self.world_size + 1, dtype=torch.int64, device=self.device)
            mine.index_add_(0, self._ranks_of_holders, counts.to(torch.int64))
            if done:
                mine[-1:].fill_(1)
            matrix = self._all_counts(mine)
            all_done = bool((matrix[:, -1] > 0).all())
            ask = matrix[self.rank, :-1].tolist()  # what this rank asks of each rank
            wanted = matrix[:, self.rank].tolist()  # what each asks of this one
            if ask[self.rank]:
                raise RuntimeError(
                    f"rank {self.rank} asked itself for {ask[self.rank]} rows of its own nodes"
                )
            if int(matrix[:, :-1].sum()) == 0:  # nobody asks anybody: no more collectives
                empty = torch.empty((0, self.table.num_features), dtype=self.table.dtype)
                return PendingRows(empty.to(self.device)), all_done
            ids = ids[: sum(ask)]
            asked = torch.empty(sum(wanted), dtype=torch.int64, device=self.device)
            dist.all_to_all_single(
                asked, ids, output_split_sizes=wanted, input_split_sizes=ask, group=self.group
            )
            served = self._serve(asked)
            rows = torch.empty(
                (sum(ask), self.table.num_features),
                dtype=self.table.dtype,
                device=self.device,
            )
            work = dist.all_to_all_single(
                rows,
                served,
                output_split_sizes=ask,
                input_split_sizes=wanted,
                group=self.group,
                async_op=True,
            )
            assert work is not None
            self.moved.rounds += 1
            self.moved.rows_in += rows.size(0) * self.row_bytes
            self.moved.rows_out += served.size(0) * self.row_bytes
            self.moved.ids += (ids.numel() + asked.numel()) * 8
            if self.stream is None:
                return PendingRows(rows, work=work), all_done
            work.wait()  # the exchange stream waits for the rows (the host does not)
            event = torch.cuda.Event()  # type: ignore[no-untyped-call]
            event.record(self.stream)
            return PendingRows(rows, done=event), all_done

    def _all_counts(self, mine: Tensor) -> Tensor:
        """Every rank's request row (``[world, world + 1]``, the done flag last), on the host."""
        width = self.world_size + 1
        gathered = torch.empty(self.world_size * width, dtype=torch.int64, device=self.device)
        dist.all_gather_into_tensor(gathered, mine, group=self.group)
        return self._read(gathered).view(self.world_size, width)

    def _read(self, t: Tensor) -> Tensor:
        """``t`` on the host, waited for by polling (bounded: a lost peer fails it)."""
        if not self.cuda:
            return t
        host = self._counts_host.view(-1)[: t.numel()]
        host.copy_(t, non_blocking=True)
        event = torch.cuda.Event()  # type: ignore[no-untyped-call]
        event.record(torch.cuda.current_stream(self.device))
        wait_for_event(event, timeout_s=self.timeout_s, what="the feature exchange's counts")
        return host.clone()

    def _holder_of(self, ids: Tensor) -> Tensor:
        """The holder that owns each id: by the layout's ranges, or the table's owner map."""
        if self.layout is not None:
            return self.layout.holder_of(ids)
        assert self.table.owner is not None  # checked when made
        return self.table.owner[ids]

    def _serve(self, asked: Tensor) -> Tensor:
        """The rows of the owned nodes ``asked``; an id this rank does not own is an error."""
        table = self.table
        if asked.numel() == 0:
            return torch.empty((0, table.num_features), dtype=table.dtype, device=table.device)
        if not self.cuda:  # a cheap check where a host read costs nothing
            lo, hi = int(asked.min()), int(asked.max())
            if table.owner is not None:
                if (
                    lo < 0
                    or hi >= table.num_nodes
                    or bool((table.owner[asked] != table.partition).any())
                ):
                    raise RuntimeError(
                        f"rank {self.rank} was asked for rows of {table.node_type!r} nodes "
                        f"in [{lo}, {hi}] that partition {table.partition} does not own"
                    )
            elif lo < table.start or hi >= table.end:
                raise RuntimeError(
                    f"rank {self.rank} was asked for rows [{lo}, {hi}] but owns "
                    f"[{table.start}, {table.end})"
                )
        return table.local_rows(asked)

    # ------------------------------------------------------------------ phases

    def finish_phase(self) -> int:
        """Answer the peers' requests with empty rounds until every rank is done, after the
        rounds already started; returns the rounds it took."""
        return self.start_finish().result()

    def start_finish(self) -> Future[int]:
        """:meth:`finish_phase` on the exchange's thread; the caller goes on at once. A rank
        with several exchanges (one per node type) ends their phases side by side: a peer
        may still need rounds of one while this rank waits in another."""
        return self._thread().submit(self._finish_rounds)

    def _finish_rounds(self) -> int:
        nothing = torch.empty(0, dtype=torch.int64, device=self.device)
        none = torch.zeros(self.num_holders, dtype=torch.int64, device=self.device)
        rounds = 0
        while True:
            pending, all_done = self.round(nothing, none, done=True)
            pending.wait()
            rounds += 1
            if all_done:
                return rounds

    def fetch_all(
        self, ids: Tensor, sink: Callable[[Tensor, Tensor], None], *, chunk: int = FILL_CHUNK
    ) -> None:
        """Fetch the rows of the remote ``ids`` (any order) in rounds of at most ``chunk``
        ids, handing each round's ids and rows to ``sink`` (one chunk in memory at a time),
        as one phase: every rank calls it, with as many ids as it likes (none included).
        Its rounds run on the calling thread: no loader's phase may run beside it."""
        ids = ids.to(self.device, torch.int64)
        holders = self.num_holders
        for lo in range(0, ids.numel(), chunk):
            part = ids[lo : lo + chunk]
            order, counts = group_by_key(self._holder_of(part), holders)
            asked = part[order]
            pending, _ = self.round(asked, counts, done=False)
            sink(asked, pending.wait())
        self.finish_phase()
