"""How seed nodes are split across trainer ranks, each epoch.

Seeds are grouped by the holder that owns them (a sampler in server-client mode, a trainer
pod in worker mode), so that a batch's seeds, their labels and most of their neighbourhood
live on one holder. Each holder's seeds are shuffled with a generator seeded by (seed, epoch,
holder) and dealt out to the ranks that draw from it: every rank in server-client mode, the
pod's own processes in worker mode. Every rank can compute every other rank's share without
communication, so training epochs are padded (by repeating a rank's own seeds) to the same
number of steps everywhere, which DDP needs to avoid a hang. Evaluation is not padded.

A typed job's sampling streams are derived from the same figures (:func:`stream_seed`,
:func:`epoch_stream`, :func:`batch_stream`): a rank's epoch, an evaluation and a server-side
batch each restart from (job seed, epoch or evaluation key, rank[, batch]), so that a
resumed run samples what an uninterrupted one did.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch
from torch import Tensor

Batch = tuple[int, Tensor]
"""A mini-batch of seeds: (holder that owns them, global node ids)."""


def holder_ranks(
    num_holders: int,
    world_size: int,
    *,
    worker_mode: bool,
    procs_per_pod: int = 1,
    sampler_places: Sequence[Hashable] | None = None,
    trainer_places: Sequence[Hashable] | None = None,
) -> list[list[int]]:
    """The trainer ranks that draw seeds from each holder.

    In server-client mode with placements given (see :func:`local_ranks`), a trainer draws
    from the samplers nearest to it; without them, every rank draws from every sampler.
    """
    if not worker_mode:
        if sampler_places is None or trainer_places is None:
            return [list(range(world_size)) for _ in range(num_holders)]
        return local_ranks(sampler_places, trainer_places)
    if num_holders * procs_per_pod != world_size:
        raise ValueError(
            f"worker mode needs one holder per trainer pod: {num_holders} holders x "
            f"{procs_per_pod} processes != {world_size} ranks"
        )
    return [list(range(h * procs_per_pod, (h + 1) * procs_per_pod)) for h in range(num_holders)]


Place = Hashable
"""Where a process runs, as ``(node, gpu)``: equal places share a GPU, equal nodes a host."""


def _node(place: Place) -> Hashable:
    return place[0] if isinstance(place, tuple) else place


def local_ranks(
    sampler_places: Sequence[Place], trainer_places: Sequence[Place]
) -> list[list[int]]:
    """Server-client locality: which trainer ranks draw from each sampler.

    A trainer draws only from the samplers on its own GPU; failing that, from those on its
    own node; only a trainer with no sampler on its node draws from remote samplers, and
    those trainers are spread over the samplers with the fewest ranks. A sampler that no
    trainer is local to is drawn from by every trainer (its seeds must be trained on), so
    that its load is spread evenly. Every sampler gets at least one rank.
    """
    samplers, trainers = list(sampler_places), list(trainer_places)
    ranks: list[list[int]] = [[] for _ in samplers]
    for r, place in enumerate(trainers):
        near = [h for h, p in enumerate(samplers) if p == place]
        if not near:
            near = [h for h, p in enumerate(samplers) if _node(p) == _node(place)]
        for h in near:
            ranks[h].append(r)
    homeless = [r for r in range(len(trainers)) if not any(r in rs for rs in ranks)]
    for r in homeless:
        h = min(range(len(samplers)), key=lambda k: (len(ranks[k]), k))
        ranks[h].append(r)
    everyone = list(range(len(trainers)))
    return [sorted(rs) if rs else everyone for rs in ranks]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _generator(seed: int, epoch: int, holder: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed((seed * 1_000_003 + epoch * 7_919 + holder) % (2**63 - 1))
    return g


def _share(
    seeds: Tensor, ranks: Sequence[int], rank: int, *, epoch: int, seed: int, holder: int, pad: bool
) -> Tensor:
    """This rank's shuffled share of one holder's seeds, padded to the largest share."""
    k = len(ranks)
    n = int(seeds.numel())
    i = list(ranks).index(rank)
    perm = seeds[torch.randperm(n, generator=_generator(seed, epoch, holder))]
    lo, hi = i * n // k, (i + 1) * n // k
    part = perm[lo:hi]
    target = _ceil_div(n, k)
    if pad and 0 < part.numel() < target:
        part = torch.cat([part, part[: target - part.numel()]])
    elif pad and part.numel() == 0 and n > 0:
        part = perm[:target]
    return part


def _batches(
    seeds_by_holder: Sequence[Tensor],
    ranks_of_holder: Sequence[Sequence[int]],
    rank: int,
    batch_size: int,
    *,
    epoch: int,
    seed: int,
    pad: bool,
) -> list[Batch]:
    per_holder: list[list[Batch]] = []
    for h, (seeds, ranks) in enumerate(zip(seeds_by_holder, ranks_of_holder, strict=True)):
        if rank not in ranks:
            continue
        part = _share(seeds, ranks, rank, epoch=epoch, seed=seed, holder=h, pad=pad)
        per_holder.append([(h, b) for b in torch.split(part, batch_size) if b.numel() > 0])
    # Interleave holders so that every sampler sees a steady share of each rank's requests.
    out: list[Batch] = []
    for i in range(max((len(b) for b in per_holder), default=0)):
        out.extend(b[i] for b in per_holder if i < len(b))
    return out


def steps_per_epoch(
    seeds_by_holder: Sequence[Tensor],
    ranks_of_holder: Sequence[Sequence[int]],
    world_size: int,
    batch_size: int,
) -> int:
    """Training steps every rank takes in one epoch: the largest share, in batches."""
    counts = [int(s.numel()) for s in seeds_by_holder]
    best = 0
    for r in range(world_size):
        steps = 0
        for n, ranks in zip(counts, ranks_of_holder, strict=True):
            if r in ranks and n > 0:
                steps += _ceil_div(_ceil_div(n, len(ranks)), batch_size)
        best = max(best, steps)
    return best


def train_batches(
    seeds_by_holder: Sequence[Tensor],
    ranks_of_holder: Sequence[Sequence[int]],
    world_size: int,
    rank: int,
    batch_size: int,
    *,
    epoch: int,
    seed: int,
) -> list[Batch]:
    """This rank's training batches for an epoch; every rank gets the same number."""
    own = _batches(
        seeds_by_holder, ranks_of_holder, rank, batch_size, epoch=epoch, seed=seed, pad=True
    )
    steps = steps_per_epoch(seeds_by_holder, ranks_of_holder, world_size, batch_size)
    if steps and not own:
        holders = [h for h, ranks in enumerate(ranks_of_holder) if rank in ranks]
        raise ValueError(
            f"trainer rank {rank} has no training seeds: holders {holders} own no training "
            "nodes. Use fewer partitions or a larger training split."
        )
    return [own[i % len(own)] for i in range(steps)]


def epoch_subset(
    seeds_by_holder: Sequence[Tensor], count: int | None, *, epoch: int, seed: int
) -> list[Tensor]:
    """A fresh random subset of about ``count`` seeds for ``epoch`` (None or at least all:
    every seed), drawn from each holder in proportion to its share (rounded up, so that a
    holder with seeds keeps at least one). Seeded by (seed, epoch, holder): every rank
    draws the same subset without communication."""
    total = sum(int(s.numel()) for s in seeds_by_holder)
    if count is None or count >= total:
        return list(seeds_by_holder)
    out = []
    for h, seeds in enumerate(seeds_by_holder):
        n = int(seeds.numel())
        take = min(n, _ceil_div(count * n, total))
        # another stream than _share's shuffle of the same (seed, epoch, holder)
        g = _generator(seed + 1, epoch, h)
        out.append(seeds[torch.randperm(n, generator=g)[:take]] if take < n else seeds)
    return out


def eval_batches(
    seeds_by_holder: Sequence[Tensor],
    ranks_of_holder: Sequence[Sequence[int]],
    rank: int,
    batch_size: int,
) -> list[Batch]:
    """This rank's share of evaluation seeds, each seed exactly once across all ranks."""
    return _batches(seeds_by_holder, ranks_of_holder, rank, batch_size, epoch=0, seed=0, pad=False)


# --------------------------------------------------------------------------- random streams

EVAL_STREAM = 1_000_000_007
"""Offset of the evaluation's random streams from the training epochs'."""


def stream_seed(seed: int, epoch: int, rank: int) -> int:
    """The sampler's seed for one rank's epoch (``epoch`` < 0: evaluations)."""
    return (seed * 1_000_003 + epoch * 7_919 + rank * 104_729) % (2**63 - 1)


def epoch_stream(seed: int, epoch: int | None, evaluation: int, rank: int) -> int:
    """The random stream of a rank's training epoch ``epoch``, or (None) of its evaluation
    numbered ``evaluation``."""
    if epoch is None:
        return stream_seed(seed + EVAL_STREAM, evaluation, rank)
    return stream_seed(seed, epoch, rank)


def batch_stream(seed: int, epoch: int | None, evaluation: int, rank: int, index: int) -> int:
    """The random stream of batch ``index`` of a rank's epoch (None: of an evaluation)."""
    return stream_seed(epoch_stream(seed, epoch, evaluation, rank), index, 0)
