"""Accuracy check of heterogeneous link prediction (author__writes__paper of a small
syntheticMag): distgnn's trainer and a plain PyG reference
(tests/support/hetero_link_reference.py: to_hetero(GraphSAGE), sparse embeddings of the
featureless types, a reference sampler) trained on the store the partition Job wrote, with
the same model size, dot decoder, uniform negatives, epochs, batch size and learning rate;
the test MRR against the same fixed negatives. distgnn's is the mean over two seeds, and it
must be within 0.02 of the reference's, or better. The reference trains one seed: its test
MRR hardly moves with the seed (0.364, 0.370, 0.367 and 0.366 for seeds 0-3, where
distgnn's spread over 0.345-0.379), and its plain-Python sampler makes each of its runs six
times as long as one of distgnn's. (distgnn also leaves each batch's positives and their
reverses out of its subgraph; the reference samples them.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distgnn_workload.partition import HeteroPartitionStore
from distgnn_workload.partition.link_split import read_link_split
from distgnn_workload.runtime.ddp import single_process
from distgnn_workload.runtime.link_batches import link_edge_types, typed_train_pairs
from distgnn_workload.runtime.training_data import from_store
from distgnn_workload.trainer.link_loop import HeteroLinkTrainer, read_eval_splits
from distgnn_workload.trainer.rank import TypedRank
from tests.support.hetero_link_reference import train_reference
from tests.workload.test_partition_typed_link import LinkJob

pytestmark = pytest.mark.slow

NEGATIVES, HIDDEN, EMBEDDING, FANOUTS, EPOCHS, BATCH, LR = 50, 32, 32, (5, 3), 3, 256, 0.005
TOLERANCE = 0.02
SEEDS = (0, 1)
REFERENCE_SEEDS = (0,)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> LinkJob:
    job = LinkJob(
        tmp_path_factory.mktemp("hetero-link-accuracy"),
        {"syntheticMag": {"scale": 0.003, "numFeatures": 16, "numClasses": 20}},
        {
            "edgeType": "author__writes__paper",
            "split": {"valid": 0.05, "test": 0.1},
            "evaluation": {"negatives": NEGATIVES, "hitsAt": [1, 10]},
        },
        model={
            "arch": "rsage",
            "hiddenChannels": HIDDEN,
            "numLayers": len(FANOUTS),
            "fanout": list(FANOUTS),
            "embeddingDim": EMBEDDING,
            "dropout": 0.0,
        },
        training={"epochs": EPOCHS, "batchSize": BATCH, "learningRate": LR, "evalEvery": 0},
    )
    done = job.run()
    assert done.returncode == 0, done.stderr
    return job


def _ours(job: LinkJob, seed: int, run_dir: Path) -> float:
    store = HeteroPartitionStore.open(job.out)
    data = from_store(store)
    edge_type, reverse = link_edge_types(job.out)
    spec = job.spec.model_copy(
        update={"training": job.spec.training.model_copy(update={"seed": seed})}
    )
    at = TypedRank(
        rank=0,
        world_size=1,
        device=torch.device("cpu"),
        ranks_of_holder=[[0], [0]],
        collectives=single_process(),
        run_dir=run_dir,
        job_uid=f"accuracy-{seed}",
        partition_dir=job.out,
    )
    trainer = HeteroLinkTrainer(
        spec,
        data,
        at,
        splits=read_eval_splits(job.out),
        edge_type=edge_type,
        reverse=reverse,
        train_ids=typed_train_pairs(job.out, 2, data.node_counts["paper"]),
    )
    result = trainer.fit()
    assert result.test_link is not None
    return result.test_link.mrr


def test_distgnn_mrr_is_within_tolerance_of_the_reference(job: LinkJob, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    graph = HeteroPartitionStore.open(job.out).to_graph()
    train = read_link_split(job.out, "train")
    test = read_eval_splits(job.out)["test"]
    edge_type, _ = link_edge_types(job.out)
    reference = [
        train_reference(
            graph,
            (train.src, train.dst),
            test,
            edge_type,
            hidden=HIDDEN,
            embedding_dim=EMBEDDING,
            fanouts=FANOUTS,
            epochs=EPOCHS,
            batch_size=BATCH,
            lr=LR,
            seed=seed,
        )
        for seed in REFERENCE_SEEDS
    ]
    ours = [_ours(job, seed, tmp_path / f"run-{seed}") for seed in SEEDS]
    random_mrr = sum(1 / k for k in range(1, NEGATIVES + 2)) / (NEGATIVES + 1)
    mean_ref, mean_ours = sum(reference) / len(reference), sum(ours) / len(ours)
    print(f"test MRR: distgnn {ours}, reference {reference}, random {random_mrr:.4f}")
    assert mean_ref > 1.5 * random_mrr
    assert mean_ours >= mean_ref - TOLERANCE, (ours, reference)
