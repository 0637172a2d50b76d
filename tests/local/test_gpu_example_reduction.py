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
from tests.e2e.gpu_examples import (
    EPOCHS,
    LINK_HELD_OUT,
    LINK_NEGATIVES,
    LINK_POSITIVES,
    MAG,
    gpu_examples,
    gpu_runs,
    min_test_accuracy,
    min_test_mrr,
    on_gpus,
    random_mrr,
    reduce_example,
)

EXAMPLES = gpu_examples()
RUNS = gpu_runs()


def test_the_gpu_runs_include_every_task_and_both_modes() -> None:
    names = {p.name for p in EXAMPLES}
    assert {"ogbn-mag.yaml", "ogbl-citation2.yaml"} <= names
    assert {m for p, m in RUNS if p.stem == "quickstart-hetero-link"} == {
        "worker",
        "server-client",
    }


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r[0].stem}-{r[1]}")
@pytest.mark.parametrize("gpus", [1, 2])
def test_reduced_example_is_a_runnable_job(
    run: tuple[Path, str], gpus: int, tmp_path: Path
) -> None:
    example, mode = run
    original = yaml.safe_load(example.read_text())
    doc = copy.deepcopy(original)
    if mode != "as-written":
        doc = on_gpus(doc, mode)
    reduced = reduce_example(doc, gpus, tmp_path)
    job = parse_job(reduced)  # admission's rules, field by field
    check_supported(job.spec)  # and what distgnn run refuses
    spec, before = job.spec, parse_job(original).spec
    assert spec.training.epochs == EPOCHS
    assert spec.training.eval_every == 1
    assert 0 < spec.trainers.replicas <= gpus
    assert spec.trainers.gpus_per_pod == 1
    assert spec.samplers.replicas <= gpus
    if mode == "server-client":
        assert spec.samplers.replicas == gpus
        assert spec.samplers.gpus_per_pod == 1
    elif mode == "worker":
        assert spec.samplers.replicas == 0
    assert spec.storage.claim_name is None
    assert spec.model == before.model
    if before.link_prediction is not None:
        link = spec.link_prediction
        assert link is not None
        assert link.split == before.link_prediction.split
        assert link.evaluation.negatives == min(
            LINK_NEGATIVES, before.link_prediction.evaluation.negatives
        )
        assert link.evaluation.max_positives is not None
        assert link.evaluation.max_positives <= LINK_POSITIVES
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


@pytest.mark.slow
def test_the_reduced_citation2_is_ogbs_link_layout_with_its_own_split(tmp_path: Path) -> None:
    """The files the reduced ogbl-citation2 example reads: the loader the partition step uses
    finds OGB's split with LINK_NEGATIVES fixed negatives per held-out citation, and no
    held-out citation among the training ones."""
    from distgnn_workload.data.ogb_link import load_ogb_link

    doc = reduce_example(
        yaml.safe_load((EXAMPLES[0].parent / "ogbl-citation2.yaml").read_text()), 2, tmp_path
    )
    data = load_ogb_link(tmp_path / doc["spec"]["dataset"]["ogb"]["path"])
    assert data.given is not None
    train = data.given["train"]
    seen = set(zip(train.src.tolist(), train.dst.tolist(), strict=True))
    for name in ("valid", "test"):
        held = data.given[name]
        assert len(held.src) == LINK_HELD_OUT
        assert held.dst_neg is not None
        assert held.dst_neg.shape == (LINK_HELD_OUT, LINK_NEGATIVES)
        assert not seen & set(zip(held.src.tolist(), held.dst.tolist(), strict=True))
    assert min_test_mrr(doc) == pytest.approx(1.5 * random_mrr(LINK_NEGATIVES))
    assert 0.07 < min_test_mrr(doc) < 0.09  # 1.5 x 0.0519


def test_on_gpus_refuses_an_unknown_mode() -> None:
    doc = yaml.safe_load((EXAMPLES[0].parent / "quickstart-hetero-link.yaml").read_text())
    with pytest.raises(ValueError, match="worker or server-client"):
        on_gpus(doc, "hybrid")
