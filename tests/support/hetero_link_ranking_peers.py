"""The processes of ``test_hetero_link_evaluation.py``: typed full-neighbourhood embeddings
of both ends of author__writes__paper, and the ranking of a fixed split against its
negatives (a module spawned children import)."""

from __future__ import annotations

from pathlib import Path

import torch

from distgnn_api.edge_types import EdgeType
from distgnn_workload.evaluation.link_ranking import rank_splits
from distgnn_workload.models.link import build_decoder
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.models.rsage import RSAGE
from distgnn_workload.runtime.ddp import Collectives
from tests.support.hetero_layerwise import (
    EDGE_TYPES,
    HIDDEN,
    NODE_TYPES,
    chunked_inference,
    sharded_rows,
    widths,
)
from tests.support.ranks import gloo_rank
from tests.workload.hetero_graphs import NUM_NODES

WRITES: EdgeType = ("author", "writes", "paper")
HITS_AT = (1, 3, 10)


def encoder() -> RelationalGNN:
    torch.manual_seed(7)
    model = RSAGE(NODE_TYPES, EDGE_TYPES, widths(), HIDDEN, HIDDEN, 2, ["author", "paper"])
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.eval()


def split(
    count: int, negatives: int
) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    g = torch.Generator().manual_seed(3)
    src = torch.randint(0, NUM_NODES["author"], (count,), generator=g)
    dst = torch.randint(0, NUM_NODES["paper"], (count,), generator=g)
    neg = torch.randint(0, NUM_NODES["paper"], (count, negatives), generator=g)
    return {"fixed": (src, dst, neg), "all": (src, dst, None)}


def evaluate_link_rank(rank: int, world_size: int, port: int, out: str) -> None:
    """One trainer: embed its shares, rank its share of the split; write the figures."""
    with gloo_rank(rank, world_size, port):
        engine = chunked_inference(sharded_rows(rank, world_size), rank, world_size)
        z = engine.embeddings(encoder())
        collectives = Collectives(rank, world_size, [f"t-{r}" for r in range(world_size)], None)
        figures = {}
        for kind in ("dot", "mlp"):
            torch.manual_seed(11)
            decoder = build_decoder(kind, HIDDEN)
            got = rank_splits(
                z["author"].rows,
                z["paper"].rows,
                NUM_NODES["paper"],
                decoder,
                split(61, 30),
                HITS_AT,
                collectives.all_gather,
                rank=rank,
                world_size=world_size,
            )
            for name, m in got.items():
                figures[f"{kind}-{name}"] = m.as_dict() | {"count": m.count}
        torch.save(figures, Path(out) / f"figures-{world_size}-{rank}.pt")
