"""What the GPU samplers of a holder hold beside the topology and the features: each one's
per-node tables, the blocks of its static sampling (a warm-up and a CUDA graph's private
pool) and, in a sampler server, the features each concurrent request gathers on its stream.

Each :class:`Item` names the code it mirrors. Used by :mod:`distgnn_api.capacity`.
"""

from __future__ import annotations

from distgnn_api.graph_size import GraphSize
from distgnn_api.pod_memory import Item, Shapes, Where
from distgnn_api.spec import DistGNNJobSpec

STATIC_SAMPLE_TEMPS = 8
"""int64 tensors of the last hop's draws live at once in sampling/static_sample.py
sample_static: pos, edge_pos, neighbours, the relabel's rank, edge_slot, draw_row, nxt and
the gathered local ids (the bool masks are left out)."""


def static_output_bytes(s: Shapes) -> int:
    """The int64 outputs of one static sampling at the layout's capacities (node_ids, src,
    dst, target_ptr)."""
    caps = s.hop_caps
    node_cap, edge_cap, target_cap = sum(caps), sum(s.edge_caps), sum(caps[:-1])
    return 8 * ((node_cap + 1) + 2 * (edge_cap + 1) + (target_cap + 2))


def static_sample_bytes(s: Shapes) -> int:
    """One static sampling's blocks (sample_static): its outputs and the last hop's
    temporaries."""
    return static_output_bytes(s) + 8 * STATIC_SAMPLE_TEMPS * s.edge_caps[-1]


def sampler_count(spec: DistGNNJobSpec) -> int:
    """GPU samplers of one holder: a sampler server makes one per concurrent request
    (sampler/server.py _new_slot), a worker-mode trainer one (trainer/pipelines.py)."""
    return 1 if spec.worker_mode else spec.samplers.concurrency


def gpu_sampler_items(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> list[Item]:
    """Items of a holder's static GPU samplers (NeighborSampler over the replicated
    topology, bounded fanouts); none on a CPU or without them."""
    if dev != "gpu" or not s.replicate or any(k < 1 for k in spec.model.fanout):
        return []
    count = sampler_count(spec)
    n = graph.num_nodes
    # NeighborSampler.__init__: its own torch.cat of indptr and a padding id (int64), and the
    # global-to-local table (int32 where scatter_reduce amin supports it: relabel.table_dtype)
    tables = (n + 2) * 8 + (n + 1) * 4
    items = [
        Item(f"{count} sampler(s): indptr copy and id table per node", count * tables, dev,
             "sampling/csr.py TypedCSR.one_type: _indptr_ext, _local"),
        Item(f"{count} sampler(s): static sampling, warm-up blocks and CUDA-graph pool",
             count * 2 * static_sample_bytes(s), dev,
             "graph_capture.py _capture_locked (a warm-up, then torch.cuda.graph)"),
    ]  # fmt: skip
    if spec.worker_mode:
        # the loader launches a batch's sampling a batch before it cuts it: that batch's
        # outputs, copied out of the captured buffers that the next replay refills
        items.append(
            Item(
                "a launched batch's sampler outputs (copied out of the CUDA graph's)",
                static_output_bytes(s),
                dev,
                "one_type_sampler.py NeighborSampler.launch, StaticOut.copied",
            )
        )
    else:
        # each request gathers its batch's rows on its slot's stream; the caching allocator
        # keeps a stream's freed blocks for that stream
        rows = round(sum(s.expected_nodes)) * graph.num_features * s.feature_bytes
        items.append(
            Item(
                f"gathered feature rows of {count} concurrent request(s), one per stream",
                count * rows,
                dev,
                "sampler/server.py _run features.gather",
            )
        )
    return items
