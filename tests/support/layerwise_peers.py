"""The processes of ``test_evaluation_distributed.py`` (a module spawned children import)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from distgnn_workload.evaluation import LayerwiseInference, full_neighbourhood_accuracy
from distgnn_workload.partition import PartitionStore
from distgnn_workload.runtime.ddp import Collectives
from tests.support.layerwise import ARCHS, model_of

WORLD_SIZE = 2


def evaluate_rank(rank: int, port: int, store_path: str, out: str) -> None:
    """One trainer: join a gloo group, run layer-wise inference of each arch's saved
    weights over its share, and write its logits and the summed accuracies to ``out``."""
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE
    )
    try:
        store = PartitionStore.open(store_path)
        collectives = Collectives(rank, WORLD_SIZE, ["trainer-0", "trainer-1"], None)
        for arch in ARCHS:
            model = model_of(arch)
            model.load_state_dict(torch.load(Path(out) / f"{arch}.weights.pt"))
            # small chunks and exchange pieces: many blocks, many all-gather calls
            engine = LayerwiseInference(
                store,
                rank=rank,
                world_size=WORLD_SIZE,
                chunk_edges=97,
                chunk_nodes=40,
                exchange_rows=17,
            )
            logits = engine.logits(model)
            accuracy = full_neighbourhood_accuracy(
                engine, model, ["val", "test"], collectives.all_reduce
            )
            torch.save(
                {"share": engine.share, "logits": logits, "accuracy": accuracy},
                Path(out) / f"{arch}-{rank}.pt",
            )
    finally:
        dist.destroy_process_group()
