"""The reduction of the GPU examples that the gpu tier runs (tests/e2e/test_cli_gpu_examples):
each reduced example is a valid job that ``distgnn run`` accepts, on a smaller graph of the
same kind, with the example's model kept."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from distgnn_api.spec import parse_job
from distgnn_operator.local.job_plan import check_supported
from tests.e2e.gpu_examples import EPOCHS, MAG, gpu_examples, min_test_accuracy, reduce_example

EXAMPLES = gpu_examples()


def test_the_gpu_examples_include_the_heterogeneous_one() -> None:
    assert "ogbn-mag.yaml" in {p.name for p in EXAMPLES}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("gpus", [1, 2])
def test_reduced_example_is_a_runnable_job(example: Path, gpus: int, tmp_path: Path) -> None:
    original = yaml.safe_load(example.read_text())
    reduced = reduce_example(copy.deepcopy(original), gpus, tmp_path)
    job = parse_job(reduced)  # admission's rules, field by field
    check_supported(job.spec)  # and what distgnn run refuses
    spec, before = job.spec, parse_job(original).spec
    assert spec.training.epochs == EPOCHS
    assert spec.training.eval_every == 1
    assert spec.trainers.replicas <= gpus
    assert spec.samplers.replicas <= gpus
    assert spec.storage.claim_name is None
    assert spec.model == before.model
    assert spec.dataset.is_hetero == before.dataset.is_hetero
    if before.dataset.is_hetero:
        mag = spec.dataset.synthetic_mag
        assert mag is not None
        assert (mag.scale, mag.num_classes, mag.seed) == (MAG["scale"], MAG["numClasses"], 0)
        assert spec.dataset.ogb is None
        hetero, was = spec.dataset.hetero_section, before.dataset.hetero_section
        assert hetero is not None
        assert was is not None
        assert hetero.target_node_type == was.target_node_type
        assert hetero.add_reverse_edges == was.add_reverse_edges
    elif before.dataset.ogb is not None:
        raw = tmp_path / before.dataset.ogb.path / "raw"
        assert sorted(p.name for p in raw.iterdir()), "no OGB files written"


def test_the_reduced_mag_threshold_is_twice_its_majority_class() -> None:
    doc = reduce_example(
        yaml.safe_load((EXAMPLES[0].parent / "ogbn-mag.yaml").read_text()), 1, Path("/nonexistent")
    )
    threshold = min_test_accuracy(doc)
    # 8 skewed classes: the largest holds about a fifth of the test papers
    assert 0.25 < threshold < 0.5
