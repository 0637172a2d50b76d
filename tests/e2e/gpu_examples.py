"""The examples that ask for GPUs, reduced to what a test machine holds, for
``test_cli_gpu_examples`` (the reduction itself is tested on CPU in tests/local).

A smaller graph: the synthetic example gets a 60k-node graph; the homogeneous OGB example gets
small files in OGB's raw format at its dataset path; the heterogeneous ones get a reduced
``syntheticMag`` with fewer classes, in place of the files they read (whose node and edge
types, being ogbn-mag's, ``syntheticMag`` has already: the declarations go). 2 epochs with
evaluation after each, no more trainer or sampler pods than there are GPUs, no resource
requests and no claim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from distgnn_api.spec import SyntheticDataset, parse_job

EXAMPLES = Path(__file__).parents[2] / "manifests" / "examples"
EPOCHS = 2
GRAPH = {"numNodes": 60000, "numEdges": 600000, "numFeatures": 100, "numClasses": 8}
MIN_TEST_ACCURACY = 0.5  # GRAPH has a clear community signal; chance is 1/8
# A twentieth of ogbn-mag: 36,819 papers (31,478 for training), 56,732 authors.
MAG = {"scale": 0.05, "numClasses": 8, "seed": 0}
MAG_MAJORITY_FACTOR = 2.0  # test accuracy must exceed this times the majority class's share


def gpu_examples() -> list[Path]:
    """The examples whose samplers or trainers ask for GPUs."""

    def wants_gpus(path: Path) -> bool:
        spec = yaml.safe_load(path.read_text())["spec"]
        return any(spec.get(role, {}).get("gpusPerPod", 0) > 0 for role in ("trainers", "samplers"))

    return [p for p in sorted(EXAMPLES.glob("*.yaml")) if wants_gpus(p)]


def is_hetero(doc: dict[str, Any]) -> bool:
    return parse_job(doc).spec.dataset.is_hetero


def _write_ogb(root: Path, scheme: str) -> None:
    """A small learnable graph in OGB's raw format, where the example expects its dataset."""
    from distgnn_workload.data.graph import edge_pairs
    from distgnn_workload.data.ogb import write_ogb
    from distgnn_workload.data.synthetic import generate

    g = generate(SyntheticDataset.model_validate(GRAPH))
    pairs = edge_pairs(g.indptr, g.indices)
    pairs = pairs[pairs[:, 0] < pairs[:, 1]]
    write_ogb(
        root,
        pairs,
        g.x,
        g.y,
        {
            name: np.flatnonzero(mask)
            for name, mask in (("train", g.train_mask), ("val", g.val_mask), ("test", g.test_mask))
        },
        scheme=scheme,
    )


def _reduced_hetero(dataset: dict[str, Any]) -> dict[str, Any]:
    hetero = {
        k: v
        for k, v in (dataset.get("hetero") or {}).items()
        if k not in ("nodeTypes", "edgeTypes")
    }
    out: dict[str, Any] = {"syntheticMag": {**(dataset.get("syntheticMag") or {}), **MAG}}
    if hetero:
        out["hetero"] = hetero
    return out


def reduce_example(doc: dict[str, Any], gpus: int, data_dir: Path) -> dict[str, Any]:
    """``doc`` reduced in place (see the module docstring); writes OGB files under
    ``data_dir`` for a homogeneous OGB example. Raises ValueError for a dataset it cannot
    reduce."""
    spec = doc["spec"]
    dataset = spec["dataset"]
    if is_hetero(doc):
        spec["dataset"] = _reduced_hetero(dataset)
    elif "synthetic" in dataset:
        dataset["synthetic"] = {**(dataset["synthetic"] or {}), **GRAPH}
    elif "ogb" in dataset:
        _write_ogb(data_dir / dataset["ogb"]["path"], dataset["ogb"].get("splitScheme", "random"))
    else:
        raise ValueError(f"no reduced dataset for {sorted(dataset)}: extend gpu_examples")
    for role in ("trainers", "samplers"):
        pod = spec.setdefault(role, {})
        pod.pop("resources", None)
        if pod.get("replicas", 1) > gpus:
            pod["replicas"] = gpus
    spec.get("partition", {}).pop("resources", None)
    spec["training"].update({"epochs": EPOCHS, "evalEvery": 1})
    spec.pop("storage", None)
    return doc


def min_test_accuracy(doc: dict[str, Any]) -> float:
    """What the reduced example's test accuracy must reach."""
    if not is_hetero(doc):
        return MIN_TEST_ACCURACY
    from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag

    mag = doc["spec"]["dataset"]["syntheticMag"]
    graph = generate_mag(
        SyntheticHeteroConfig(scale=mag["scale"], num_classes=mag["numClasses"], seed=mag["seed"])
    )
    majority = float(np.bincount(graph.y[graph.test_mask]).max() / graph.test_mask.sum())
    return MAG_MAJORITY_FACTOR * majority
