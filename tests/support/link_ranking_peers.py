"""The processes of ``test_link_evaluation_distributed.py`` (a module spawned children import)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from distgnn_workload.evaluation import LayerwiseInference
from distgnn_workload.evaluation.link_ranking import evaluate_splits
from distgnn_workload.models.link import build_decoder
from distgnn_workload.partition import PartitionStore
from distgnn_workload.runtime.ddp import Collectives
from tests.support.layerwise import NUM_CLASSES, model_of
from tests.support.ranks import leave_group

WORLD_SIZE = 2
HITS_AT = (1, 3, 10)


def decoder_of(kind: str) -> torch.nn.Module:
    torch.manual_seed(11)
    return build_decoder(kind, NUM_CLASSES)  # the encoder's output width


def evaluate_rank(rank: int, port: int, store_path: str, out: str, world_size: int) -> None:
    """One trainer: rank its share of the saved split with the saved weights; write the
    figures (or, with one process, rank every positive)."""
    if world_size > 1:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size
        )
    finished = False
    try:
        store = PartitionStore.open(store_path)
        collectives = Collectives(rank, world_size, [f"t-{r}" for r in range(world_size)], None)
        split = torch.load(Path(out) / "split.pt")
        figures = {}
        for kind in ("dot", "mlp"):
            encoder, decoder = model_of("sage"), decoder_of(kind)
            encoder.load_state_dict(torch.load(Path(out) / "encoder.pt"))
            decoder.load_state_dict(torch.load(Path(out) / f"{kind}.pt"))
            engine = LayerwiseInference.of_store(
                store, rank=rank, world_size=world_size, chunk_edges=97, chunk_nodes=40
            )
            got = evaluate_splits(
                engine,
                encoder,
                decoder,
                {
                    "fixed": (split["src"], split["dst"], split["dst_neg"]),
                    "all": (split["src"], split["dst"], None),
                },
                HITS_AT,
                collectives.all_gather,
            )
            for name, m in got.items():
                figures[f"{kind}-{name}"] = m.as_dict() | {"count": m.count}
        torch.save(figures, Path(out) / f"figures-{world_size}-{rank}.pt")
        finished = True
    finally:
        if world_size > 1:
            leave_group(finished=finished)
