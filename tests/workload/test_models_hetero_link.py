"""The link model, on a typed graph, scores the rows the typed layout puts each end in: a
positive's source against its destination, each negative's source (its own, or the
positive's for corruptDestination) against its negative destination."""

from __future__ import annotations

import pytest
import torch

from distgnn_workload.models.link import DotDecoder, LinkModel
from distgnn_workload.models.rsage import RSAGE
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler
from distgnn_workload.sampling.seed_edges import LinkLayout
from tests.support.hetero_layerwise import EDGE_TYPES, NODE_TYPES, graph, inputs, widths
from tests.workload.hetero_graphs import NUM_NODES

WRITES = ("author", "writes", "paper")


@pytest.mark.parametrize("kind", ["uniform", "corruptDestination"])
def test_scores_the_layout_rows(kind: str) -> None:
    torch.manual_seed(0)
    encoder = RSAGE(NODE_TYPES, EDGE_TYPES, widths(), 16, 8, 2, ["author", "paper"]).eval()
    model = LinkModel(encoder, DotDecoder(), 2, kind, edge_type=WRITES)
    layout = LinkLayout(5, 2, kind, WRITES)
    g = torch.Generator().manual_seed(1)
    src = torch.randint(0, NUM_NODES["author"], (5,), generator=g)
    dst = torch.randint(0, NUM_NODES["paper"], (5,), generator=g)
    dst[1] = dst[0]  # one paper twice: its two seed rows must embed alike
    neg_src, neg_dst = layout.draw_negatives(NUM_NODES["author"], NUM_NODES["paper"], g, src.device)
    seeds = layout.seeds(src, dst, neg_src, neg_dst)
    hop = HeteroNeighborSampler(graph(), NUM_NODES, [-1, -1]).sample_typed(seeds, "author")
    x = {t: rows[hop.node_ids[t]] for t, rows in inputs().items()}
    pos, neg = model(x, hop)
    z = encoder.embed_seeds(x, hop)
    assert z["author"].shape[0] == seeds["author"].numel()
    assert torch.allclose(z["paper"][0], z["paper"][1], atol=1e-6)
    assert not torch.allclose(z["paper"][0], z["paper"][2])
    assert torch.allclose(pos, (z["author"][:5] * z["paper"][:5]).sum(-1))
    sources = z["author"][:5].repeat_interleave(2, 0) if kind != "uniform" else z["author"][5:]
    assert torch.allclose(neg, (sources * z["paper"][5:]).sum(-1))
