"""Accuracy check of link prediction: distgnn's trainer and the plain-PyTorch reference
(tests/support/link_reference.py) trained on the same store the partition Job wrote (same
GraphSAGE size, dot decoder, uniform negatives, epochs, batch size and learning rate); the
test MRR against the same fixed negatives. distgnn must be within 0.02 of the reference, or
better. (distgnn also leaves each batch's positives and their reverses out of its sampled
subgraph; the reference samples them, as PyG's LinkNeighborLoader does by default.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distgnn_api import contract as c
from distgnn_api.spec import parse_spec
from distgnn_workload.partition import PartitionStore
from distgnn_workload.partition.link_job import partition_link
from distgnn_workload.runtime.features.layout import HolderLayout
from distgnn_workload.runtime.link_batches import train_pairs
from distgnn_workload.trainer.link_loop import read_eval_splits
from tests.support.link_graph import train_on
from tests.support.link_reference import LinkReferenceData, train_reference

pytestmark = pytest.mark.slow

NEGATIVES, HIDDEN, FANOUTS, EPOCHS, BATCH, LR = 100, 64, (10, 5), 3, 512, 0.005
TOLERANCE = 0.02


def _spec(**extra: object) -> dict[str, object]:
    return {
        "dataset": {"syntheticLink": {"scale": 0.001}},
        "partition": {"numPartitions": 2, "algorithm": "random"},
        "task": "linkPrediction",
        "linkPrediction": {"evaluation": {"negatives": NEGATIVES, "hitsAt": [1, 10]}},
        **extra,
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("accuracy")
    spec = parse_spec(_spec())
    key = c.partition_key(spec)
    config = c.JobConfig.model_validate_json(c.job_config_json("acc", "default", "u", spec))
    with open(tmp / "out.txt", "w") as out:
        partition_link(tmp, c.partition_dir(tmp, key), config, out)
    return c.partition_dir(tmp, key)


def test_distgnn_mrr_is_within_tolerance_of_the_reference(store: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    reference = [
        train_reference(
            store,
            hidden=HIDDEN,
            fanouts=FANOUTS,
            epochs=EPOCHS,
            batch_size=BATCH,
            lr=LR,
            hits_at=(1, 10),
            seed=seed,
        )["test_mrr"]
        for seed in (0, 1)
    ]
    spec = parse_spec(
        _spec(
            model={"arch": "sage", "hiddenChannels": HIDDEN, "numLayers": 2, "fanout": FANOUTS},
            training={"epochs": EPOCHS, "batchSize": BATCH, "learningRate": LR, "evalEvery": 0},
        )
    )
    spec = spec.model_copy(update={"model": spec.model.model_copy(update={"dropout": 0.0})})
    opened = PartitionStore.open(store)
    data = LinkReferenceData.from_store(store)
    ours = []
    for seed in (0, 1):
        training = spec.training.model_copy(update={"seed": seed})
        trainer = train_on(
            spec.model_copy(update={"training": training}),
            opened,
            tmp_path / f"run-{seed}",
            x=data.x,
            train_pairs=train_pairs(opened, HolderLayout.from_store(opened, 1))[0],
            splits=read_eval_splits(store),
            sampler_seed=seed,
        )
        result = trainer.result  # type: ignore[attr-defined]
        assert result.test_link is not None
        ours.append(result.test_link.mrr)
    random_mrr = sum(1 / k for k in range(1, NEGATIVES + 2)) / (NEGATIVES + 1)
    mean_ref, mean_ours = sum(reference) / 2, sum(ours) / 2
    print(f"test MRR: distgnn {ours}, reference {reference}, random {random_mrr:.4f}")
    assert mean_ref > 2 * random_mrr
    assert mean_ours >= mean_ref - TOLERANCE, (ours, reference)
