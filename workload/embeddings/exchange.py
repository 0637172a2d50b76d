"""The all-to-all that carries embedding ids, rows and row gradients between trainer ranks.

Each exchange moves a block of rows from every rank to every rank with
``torch.distributed.all_to_all_single`` and explicit split sizes: gloo on CPU, NCCL with
device tensors on GPUs. The split sizes must be known on the host before the call, so each
lookup first exchanges its per-destination counts (and an out-of-range flag, so that every
rank raises together instead of leaving its peers inside a collective) over the host-side
group (:meth:`RowExchange.counts_of`: those of every table of a step in one read-back and
one all-to-all): the gloo control group of
:class:`~distgnn_workload.runtime.ddp.Collectives` beside NCCL, the data group itself on CPU. Reading the counts back from a GPU follows
:mod:`distgnn_workload.runtime.transfers`: the stream is polled until done, then the counts
come back through pinned memory, so the read never blocks inside the CUDA driver while a
collective waits for a peer.

With one rank nothing is sent: rows are read from the local shard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import torch
import torch.distributed as dist
from torch import Tensor

from distgnn_workload.pinned_copies import to_host
from distgnn_workload.runtime.transfers import wait_for_stream

EXCHANGE_TIMEOUT_S = 600.0
"""How long a rank waits for its GPU stream (queued collectives) before reading counts."""


@dataclass
class ExchangeStats:
    """What one rank sent to other ranks (its own share, a local copy, is not counted)."""

    lookups: int = 0
    ids_sent: int = 0
    """Row ids asked of other owners (one per distinct row of a lookup)."""
    rows_sent: int = 0
    """Embedding rows served to other ranks."""
    grad_rows_sent: int = 0
    """Gradient rows sent back to other owners."""
    bytes_sent: int = 0
    """The payload of the three above, in bytes (counts and flags not included)."""
    rows_read: int = 0
    """Rows of this rank's shard read to serve lookups (its own included)."""
    rows_updated: int = 0
    """Rows of this rank's shard the optimizer updated."""
    _pending: dict[str, Tensor] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Counts still on the device, one accumulator per field that a step adds in place (so
    that a step captured in a CUDA graph adds to the same tensors on every replay)."""

    def add(self, name: str, value: Tensor) -> None:
        """Add the 0-d device count ``value`` to field ``name`` when next read (:meth:`flush`).

        The field's accumulator is made on its first add, which must not be inside a CUDA
        graph capture (a captured step runs eagerly first)."""
        acc = self._pending.get(name)
        if acc is None:
            if value.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                raise RuntimeError(
                    f"the embedding count {name!r} was first added inside a CUDA graph "
                    "capture; run the step eagerly once before capturing it"
                )
            acc = self._pending[name] = torch.zeros((), dtype=torch.int64, device=value.device)
        acc.add_(value)

    def flush(self) -> None:
        """Read the counts still on the device into the fields (one copy for all of them)
        and zero their accumulators in place."""
        if not self._pending:
            return
        names = list(self._pending)
        values = torch.stack([self._pending[k] for k in names])
        for acc in self._pending.values():
            acc.zero_()
        for name, value in zip(
            names, host_copy(values, "the embedding counts").tolist(), strict=True
        ):
            setattr(self, name, getattr(self, name) + int(value))

    def reset(self) -> None:
        for acc in self._pending.values():
            acc.zero_()
        for f in fields(self):
            if not f.name.startswith("_"):
                setattr(self, f.name, 0)

    def as_dict(self) -> dict[str, int]:
        self.flush()
        return {
            f.name: int(getattr(self, f.name)) for f in fields(self) if not f.name.startswith("_")
        }


@dataclass(frozen=True)
class Counts:
    """The split sizes of one lookup, and the ranks that passed ids out of range."""

    send: list[int]
    recv: list[int]
    bad_ranks: list[int]


class RowExchange:
    """All-to-all of row blocks among ``world_size`` ranks.

    ``group`` carries the rows (NCCL on GPUs, gloo on CPU; None: the default group);
    ``host_group`` carries the counts and must be a gloo group (None: ``group``, right for
    gloo; pass the control group when ``group`` is NCCL).
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        device: torch.device,
        *,
        group: dist.ProcessGroup | None = None,
        host_group: dist.ProcessGroup | None = None,
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        if world_size > 1:
            if not dist.is_initialized():
                raise RuntimeError(
                    f"a {world_size}-rank embedding exchange needs torch.distributed: "
                    "initialise the trainers' process group first"
                )
            actual = (dist.get_rank(group), dist.get_world_size(group))
            if actual != (rank, world_size):
                raise ValueError(
                    f"the exchange was made for rank {rank} of {world_size} but the process "
                    f"group says rank {actual[0]} of {actual[1]}"
                )
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.group = group
        self.host_group = host_group if host_group is not None else group
        self.stats = ExchangeStats()

    @classmethod
    def local(cls, device: torch.device | str = "cpu") -> RowExchange:
        """The exchange of a job with one trainer: no communication."""
        return cls(0, 1, torch.device(device))

    def settle(self, what: str) -> None:
        """Poll until the device's stream has run what is queued (collectives that wait for
        peers included), so that a read-back after it waits only for this process's own
        kernels. A no-op on CPU."""
        wait_for_stream(self.device, timeout_s=EXCHANGE_TIMEOUT_S, what=what)

    def counts(self, send: Tensor, bad: Tensor) -> Counts:
        """Exchange the per-destination counts ``send`` (int64, on the device) and the
        number of out-of-range ids ``bad`` (a scalar); every rank learns which ranks had any."""
        return self.counts_of([send], [bad])[0]

    def counts_of(self, sends: Sequence[Tensor], bads: Sequence[Tensor]) -> list[Counts]:
        """:meth:`counts` of several lookups at once: one read-back and one host all-to-all."""
        k = len(sends)
        payload = torch.stack(
            [
                torch.stack([send.to(torch.int64), bad.to(torch.int64).expand(send.numel())], 1)
                for send, bad in zip(sends, bads, strict=True)
            ],
            1,
        )  # [destination rank, lookup, (count, bad)]
        # the stream may hold collectives that wait for peers: poll, then copy (pinned)
        self.settle("an embedding lookup")
        mine = to_host(payload).clone()
        if self.world_size == 1:
            theirs = mine
        else:
            theirs = torch.empty_like(mine)
            dist.all_to_all_single(theirs, mine, group=self.host_group)
        sent, got = mine.tolist(), theirs.tolist()
        return [
            Counts(
                [int(row[i][0]) for row in sent],
                [int(row[i][0]) for row in got],
                [r for r, row in enumerate(got) if row[i][1] > 0],
            )
            for i in range(k)
        ]

    def rows(self, block: Tensor, send: list[int], recv: list[int]) -> Tensor:
        """Send ``block``'s rows, ``send[r]`` of them to rank ``r`` in order; return the
        ``recv[r]`` rows each rank ``r`` sent here, in rank order."""
        if self.world_size == 1:
            return block
        block = block.contiguous()
        out = block.new_empty((sum(recv), *block.shape[1:]))
        dist.all_to_all_single(
            out, block, output_split_sizes=recv, input_split_sizes=send, group=self.group
        )
        return out

    def blocks(self, block: Tensor) -> Tensor:
        """Send ``block``'s rows in ``world_size`` equal blocks, block ``r`` to rank ``r``;
        return the blocks each rank sent here, in rank order. Fixed shapes, no counts: what
        a step captured in a CUDA graph exchanges."""
        if self.world_size == 1:
            return block
        block = block.contiguous()
        out = torch.empty_like(block)
        dist.all_to_all_single(out, block, group=self.group)
        return out

    def slot_blocks(self, values: Tensor, blocks: Tensor, block: int) -> Tensor:
        """:meth:`blocks` of ``values`` (one row per slot) placed at ``blocks`` (a slot's
        ``owner * block + position``; slots past the last rank's block are not sent), in
        blocks of ``block`` rows; counts the rows sent to other ranks as row gradients."""
        world = self.world_size
        sent = values.new_zeros(((world + 1) * block, *values.shape[1:]))
        put_rows(sent, blocks, values)
        rows = ((blocks < world * block) & (blocks // block != self.rank)).sum()
        self.stats.add("grad_rows_sent", rows)
        self.stats.add("bytes_sent", rows * values[0].numel() * values.element_size())
        return self.blocks(sent[: world * block])

    def remote(self, counts: list[int]) -> int:
        """How many of ``counts`` go to (or come from) other ranks."""
        return sum(counts) - counts[self.rank]


def host_copy(tensor: Tensor, what: str) -> Tensor:
    """A host copy of ``tensor`` that never blocks inside the CUDA driver (see
    :mod:`~distgnn_workload.runtime.transfers`): poll the stream, then copy through pinned
    memory. On CPU, a clone."""
    if tensor.device.type != "cuda":
        return tensor.clone()
    wait_for_stream(tensor.device, timeout_s=EXCHANGE_TIMEOUT_S, what=what)
    return to_host(tensor)


def sum_rows(values: Tensor, index: Tensor, num_rows: int) -> Tensor:
    """``out[index[i]] += values[i]`` into ``num_rows`` zero rows, in a fixed order.

    On CPU ``index_add_`` adds in index order. On CUDA ``index_add_`` uses atomics (the sum's
    order, and so its last bits, vary from run to run); ``index_put_`` with ``accumulate``
    sorts the indices and adds each row's values in that order, the same every run. Its
    public form reads the indices' minimum and maximum back to check them (two host syncs);
    the indices here are built in range, so the unchecked form runs instead.
    """
    out = torch.zeros((num_rows, *values.shape[1:]), dtype=values.dtype, device=values.device)
    if values.device.type == "cuda":
        return put_rows(out, index, values, accumulate=True)
    return out.index_add_(0, index, values)


def put_rows(out: Tensor, index: Tensor, values: Tensor, *, accumulate: bool = False) -> Tensor:
    """``out[index] = values`` (``+=`` with ``accumulate``), ``index`` known to be in range:
    ``index_put_`` without its range check, which on CUDA reads the indices back."""
    torch.ops.aten._index_put_impl_(out, (index,), values, accumulate, True)
    return out
