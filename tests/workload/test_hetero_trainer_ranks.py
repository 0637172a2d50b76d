"""The heterogeneous training loop over two real processes (gloo), with uneven splits.

Partition 0 owns every validation paper and most test papers, so rank 1 has fewer
evaluation batches than rank 0 (none at all for validation): its embedding lookups must
still meet rank 0's, step for step, or the collectives would hang or mismatch. Both ranks
must end with the same figures, and the embedding rows must have been trained. Training
draws its seeds from the training papers only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import Tensor

from distgnn_api.spec import parse_spec
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.embeddings import initial_rows
from distgnn_workload.runtime.ddp import Collectives
from distgnn_workload.runtime.seeds import Batch
from distgnn_workload.runtime.training_data import contiguous_book, from_graph
from distgnn_workload.trainer.loop import HeteroTrainer
from distgnn_workload.trainer.rank import TypedRank
from tests.support.ranks import leave_group, spawn_ranks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

WORLD = 2
SEED = 5


def _spec() -> Any:
    return parse_spec(
        {
            "dataset": {"syntheticMag": {"scale": 0.003, "numClasses": 6}},
            "samplers": {"replicas": 0},
            "trainers": {"replicas": WORLD, "gpusPerPod": 0},
            "model": {
                "arch": "rsage",
                "hiddenChannels": 16,
                "numLayers": 2,
                "fanout": [5, 3],
                "embeddingDim": 8,
            },
            "training": {
                "epochs": 2,
                "batchSize": 64,
                "learningRate": 0.01,
                "seed": SEED,
                # sampled: the uneven evaluation batches are what this test is about
                "evaluation": {"test": "sampled", "validation": "sampled"},
            },
        }
    )


def _worker(rank: int, tmp: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{tmp}/store",
        rank=rank,
        world_size=WORLD,
        timeout=timedelta(seconds=120),
    )
    graph = generate_mag(SyntheticHeteroConfig(scale=0.003, num_classes=6, seed=1))
    book = contiguous_book(graph.node_counts, WORLD)
    papers = book["paper"]
    papers[torch.from_numpy(graph.val_mask)] = 0  # rank 1: no validation papers
    test = torch.from_numpy(graph.test_mask).nonzero().flatten()
    papers[test[: 3 * len(test) // 4]] = 0  # rank 1: a quarter of the test papers
    data = from_graph(graph, book, WORLD)
    at = TypedRank(
        rank=rank,
        world_size=WORLD,
        device=torch.device("cpu"),
        ranks_of_holder=[[0], [1]],
        collectives=Collectives(rank, WORLD, ["a", "b"], None),
        run_dir=Path(tmp) / "run",
        job_uid="ranks",
    )
    trainer = HeteroTrainer(_spec(), data, at)
    seeds: dict[str, list[Tensor]] = {"train": [], "eval": []}
    epoch_of = trainer.hetero.epoch

    def spy(
        batches: Sequence[Batch],
        static: Any = None,
        *,
        epoch: int | None = None,
        evaluation: int = 0,
    ) -> Any:
        seeds["eval" if epoch is None else "train"].extend(ids for _, ids in batches)
        return epoch_of(batches, static, epoch=epoch, evaluation=evaluation)

    trainer.hetero.epoch = spy  # type: ignore[method-assign]
    result = trainer.fit()
    torch.save(
        {
            "result": result.model_dump(),
            "val": [v.numel() for v in data.val_ids],
            "tables": {t.node_type: (t.rows.clone(), t.weight.clone()) for t in trainer.tables},
            "history": trainer.state.history,
            "train_seeds": torch.cat(seeds["train"]),
            "eval_seeds": torch.cat(seeds["eval"]),
            "masks": {
                split: torch.from_numpy(getattr(graph, f"{split}_mask"))
                for split in ("train", "val", "test")
            },
        },
        Path(tmp) / f"rank{rank}.pt",
    )
    leave_group()


def test_two_ranks_with_uneven_evaluation_shares_agree(tmp_path: Path) -> None:
    spawn_ranks(_worker, (str(tmp_path),), WORLD)
    saved = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]
    assert saved[0]["val"][1] == 0 < saved[0]["val"][0]
    r0, r1 = (s["result"] for s in saved)
    assert r0["test_accuracy"] == r1["test_accuracy"]
    assert r0["val_accuracy"] == r1["val_accuracy"]
    assert 0.0 < r0["test_accuracy"] <= 1.0
    assert [h["val_accuracy"] for h in saved[0]["history"][:1]] == [
        h["val_accuracy"] for h in saved[1]["history"][:1]
    ]
    for s in saved:
        # training draws training seeds only; the evaluations draw validation and test seeds
        masks = s["masks"]
        assert bool(masks["train"][s["train_seeds"]].all())
        assert not bool(masks["test"][s["train_seeds"]].any())
        assert bool((masks["val"] | masks["test"])[s["eval_seeds"]].all())
        assert set(s["tables"]) == {"author", "institution", "field_of_study"}
        for node_type, (rows, weight) in s["tables"].items():
            assert rows.numel() > 0, node_type
            start = initial_rows(SEED, node_type, rows, weight.shape[1])
            assert not torch.equal(weight, start), f"{node_type}: no row was trained"
