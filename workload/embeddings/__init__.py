"""Learnable embeddings for node types without features, sharded over the trainer ranks.

- ``ownership``: which rank owns each row (from the partition book, or contiguous blocks);
- ``exchange``: the all-to-all of ids, rows and row gradients (gloo on CPU, NCCL on GPUs,
  counts on the host-side gloo group), and what each rank sent;
- ``distinct``: distinct ids at a fixed capacity, their number on the device;
- ``table``: :class:`ShardedEmbedding`, one per featureless node type: the rows this rank
  owns (fp32) and the collective, differentiable ``lookup`` (``lookup_tables``: several
  tables with one exchange of counts); ``padded``: its fixed-shape lookup over several
  ranks (blocks of a fixed size, no counts: what a captured step looks up); ``routes``:
  what a lookup leaves for its update;
- ``optim``: row-sparse Adam (lazy, as ``torch.optim.SparseAdam``) and Adagrad, applied by
  each owner to the rows a step touched; ``fused_adam``: that Adam step in one Triton kernel
  per table, the default for rows in a GPU's memory (``RowSparseAdam(fused=False)`` takes
  the tensor operations);
- ``checkpoint``: each rank's shards and optimizer state beside the model's checkpoint.

How a trainer uses it
---------------------
Worker mode: trainer pod ``p`` holds partition ``p`` and its processes are the ranks
``holder_ranks(...)[p]``; each process owns a contiguous block of its partition's rows of
every featureless type::

    own = RowOwnership.from_partition_book(ntype, book_of[ntype], ranks_of_holder, world)
    exchange = RowExchange(rank, world, device, group=None, host_group=collectives.group)
    table = ShardedEmbedding(own, dim, exchange, seed=spec.training.seed)
    sparse = RowSparseAdam([table, ...], lr=...)

    # each step, on every rank, every table in the same order (empty ids when a batch has
    # no node of that type), outside any CUDA graph capture:
    x[ntype] = table.lookup(batch.node_ids[ntype])      # or, all tables at once:
    rows = lookup_tables(tables, [batch.node_ids[t.node_type] for t in tables])
    loss.backward(); dense_optimizer.step(); sparse.step()   # sparse.step is collective

The sampled neighbourhoods of a partition's seeds lie mostly in that partition, so most
rows a rank asks for are its own (a local copy: the all-to-all's self share).

Server-client mode: the samplers hold the partitions, but the embeddings stay with the
trainers, because only the trainers take part in the backward and the trainers' process
group: the rows of partition ``p`` go to the trainers that draw seeds from sampler ``p``
(``holder_ranks`` with the placements, the same call). The sampler then sends node ids only;
no embedding row or gradient goes through RPC. Keeping the rows on the samplers instead
would need a parameter-server push of row gradients over RPC (DistDGL's KVStore) and a
sampler-side optimizer; nothing here needs it.

GPU and CUDA graphs
-------------------
On GPUs the shard, its optimizer state and every exchanged block are device tensors and
the all-to-alls run on NCCL. Nothing in a lookup or an update has a size that depends on
the data: the distinct ids of a lookup are kept at the batch's size with their number on
the device (``distinct``: a sort and a cumulative sum instead of ``torch.unique``; ids left
out each get a slot of their own past the count), and the optimizer updates that
fixed-size set of rows, the padding slots adding nothing, so that no row other than the
touched ones changes (``optim``; Adam's step count is a device counter too). So:

- one rank (every row local): a lookup and an update read nothing back; the rows-looked-up
  counts and the ids' range check stay on the device until read
  (``ShardedEmbedding.take_counts``, once per epoch in the trainer);
- several ranks, ``lookup``: only the split sizes of the all-to-alls go through the host,
  for every table of a step at once (``lookup_tables``: one read-back per step, through
  pinned memory after polling the stream, ``runtime.transfers``, and one all-to-all on the
  host group);
- several ranks, ``lookup_padded`` (a fixed buffer of ids and their number on the device):
  no counts at all, each rank sends every rank a block of the buffer's size (or of a given
  ``block``) and gets the rows, and later sends the row gradients, back in blocks of that
  size. Every rank's blocks must have the same size. A worker-mode trainer fits the block
  to the most ids one owner held in one of its first batches (agreed over the ranks, with
  the caps' headroom): with two ranks that halves the rows served, sent and updated per
  step against whole-buffer blocks. Its pipeline counts every batch's ids per owner
  (``ShardedEmbedding.owner_counts``, copied out on the loader thread) and a batch over a
  block steps eagerly on every rank; an id past a full block is an error
  (``check_lookups``).

``runtime.host_syncs.HostSyncCounter`` counts the read-backs a step's Python makes on any
device; the CPU tests run the same code with gloo for both groups. The captured fixed-shape
step looks its ids up with ``lookup_padded`` and ends with ``sparse.step()``, both inside
the graph; a batch over the step's caps looks up with ``lookup_tables``, eagerly, on every
rank at once (``trainer.graph_step.HeteroGraphStep``).
"""

from distgnn_workload.embeddings.checkpoint import load_shards, save_shards, shard_path
from distgnn_workload.embeddings.exchange import ExchangeStats, RowExchange
from distgnn_workload.embeddings.init_rows import initial_rows
from distgnn_workload.embeddings.optim import RowSparseAdagrad, RowSparseAdam, RowSparseOptimizer
from distgnn_workload.embeddings.ownership import OwnershipError, RowOwnership
from distgnn_workload.embeddings.table import (
    LookupRangeError,
    ShardedEmbedding,
    lookup_tables,
)

__all__ = [
    "ExchangeStats",
    "LookupRangeError",
    "OwnershipError",
    "RowExchange",
    "RowOwnership",
    "RowSparseAdagrad",
    "RowSparseAdam",
    "RowSparseOptimizer",
    "ShardedEmbedding",
    "initial_rows",
    "load_shards",
    "lookup_tables",
    "save_shards",
    "shard_path",
]
