"""Learnable embeddings for node types without features, sharded over the trainer ranks.

- ``ownership``: which rank owns each row (from the partition book, or contiguous blocks);
- ``exchange``: the all-to-all of ids, rows and row gradients (gloo on CPU, NCCL on GPUs,
  counts on the host-side gloo group), and what each rank sent;
- ``table``: :class:`ShardedEmbedding`, one per featureless node type: the rows this rank
  owns (fp32) and the collective, differentiable ``lookup``;
- ``optim``: row-sparse Adam (lazy, as ``torch.optim.SparseAdam``) and Adagrad, applied by
  each owner to the rows a step touched;
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
    x[ntype] = table.lookup(batch.node_ids[ntype])
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
the all-to-alls run on NCCL; only the per-lookup counts go through the host, read back
through pinned memory after polling the stream (``runtime.transfers``). Each lookup and each
table's gradient reduction therefore drains the stream once (``torch.unique`` reads its size
back too, and runs only after the poll, so that no read-back waits for a peer). The CPU tests run
the same code with gloo for both groups. A lookup's shapes depend on the batch and it reads
counts on the host, so it runs eagerly, outside any CUDA graph capture; a captured
fixed-shape step would take the looked-up rows as an input and hand their gradient back
before ``sparse.step()`` (the trainer's part, not built here).
"""

from distgnn_workload.embeddings.checkpoint import load_shards, save_shards, shard_path
from distgnn_workload.embeddings.exchange import ExchangeStats, RowExchange
from distgnn_workload.embeddings.optim import RowSparseAdagrad, RowSparseAdam, RowSparseOptimizer
from distgnn_workload.embeddings.ownership import OwnershipError, RowOwnership
from distgnn_workload.embeddings.table import (
    LookupRangeError,
    ShardedEmbedding,
    initial_rows,
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
