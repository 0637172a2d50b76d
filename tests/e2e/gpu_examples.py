"""The examples that ask for GPUs, reduced to what a test machine holds, for
``test_cli_gpu_examples`` (the reduction itself is tested on CPU in tests/local).

A smaller graph: the synthetic example gets a 60k-node graph; the homogeneous OGB example gets
small files in OGB's raw format at its dataset path (ogbl-citation2's link layout, with its
own split and fixed negatives, for a link-prediction example); the heterogeneous ones get a
reduced ``syntheticMag`` with fewer classes, in place of the files they read (whose node and
edge types, being ogbn-mag's, ``syntheticMag`` has already: the declarations go). 2 epochs
with evaluation after each, no more trainer or sampler pods than there are GPUs, no resource
requests and no claim; a link example ranks at most LINK_POSITIVES held-out edges against
LINK_NEGATIVES negatives each.

``ON_GPUS`` adds CPU examples run on GPUs as well (``on_gpus``): the heterogeneous link
example, whose typed sampler, embeddings and ranking have no GPU example of their own, in
worker mode and in server-client mode (a sampler per GPU, CUDA RPC).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from distgnn_api.spec import SyntheticDataset, parse_job

EXAMPLES = Path(__file__).parents[2] / "manifests" / "examples"
EPOCHS = 2
# An easy graph (the defaults are as hard as ogbn-products): two epochs must reach the bar.
GRAPH = {
    "numNodes": 60000,
    "numEdges": 600000,
    "numFeatures": 100,
    "numClasses": 8,
    "homophily": 0.8,
    "featureNoise": 1.0,
}
MIN_TEST_ACCURACY = 0.5  # GRAPH has a clear community signal; chance is 1/8
# A twentieth of ogbn-mag: 36,819 papers (31,478 for training), 56,732 authors.
MAG = {"scale": 0.05, "numClasses": 8, "seed": 0}
MAG_MAJORITY_FACTOR = 2.0  # test accuracy must exceed this times the majority class's share
# A 1/60 of ogbl-citation2 (48,799 nodes, 509,353 edges), 2,000 valid and 2,000 test citations
LINK = {"scale": 1 / 60, "numFeatures": 64, "seed": 0}
LINK_HELD_OUT = 2000
LINK_NEGATIVES = 100
LINK_POSITIVES = 1000
LINK_MRR_FACTOR = 1.5  # test MRR must exceed this times a random ranking's
ON_GPUS = {"quickstart-hetero-link": ("worker", "server-client")}


def gpu_examples() -> list[Path]:
    """The examples whose samplers or trainers ask for GPUs."""

    def wants_gpus(path: Path) -> bool:
        spec = yaml.safe_load(path.read_text())["spec"]
        return any(spec.get(role, {}).get("gpusPerPod", 0) > 0 for role in ("trainers", "samplers"))

    return [p for p in sorted(EXAMPLES.glob("*.yaml")) if wants_gpus(p)]


def is_hetero(doc: dict[str, Any]) -> bool:
    return parse_job(doc).spec.dataset.is_hetero


def is_link(doc: dict[str, Any]) -> bool:
    return parse_job(doc).spec.link_prediction is not None


def gpu_runs() -> list[tuple[Path, str]]:
    """(example, mode) pairs the gpu tier runs: each GPU example as written ("as-written"),
    and each of ``ON_GPUS`` in its modes."""
    runs = [(p, "as-written") for p in gpu_examples()]
    return runs + [(EXAMPLES / f"{name}.yaml", m) for name, ms in ON_GPUS.items() for m in ms]


def on_gpus(doc: dict[str, Any], mode: str) -> dict[str, Any]:
    """A CPU example with a trainer per GPU, in worker mode or with a sampler per GPU beside
    them (server-client); ``reduce_example`` then caps both at the GPUs there are."""
    spec = doc["spec"]
    spec["trainers"] = {**spec.get("trainers", {}), "gpusPerPod": 1}
    if mode == "server-client":
        spec["samplers"] = {"replicas": 2, "gpusPerPod": 1, "workers": 1}
    elif mode == "worker":
        spec["samplers"] = {"replicas": 0}
    else:
        raise ValueError(f"mode {mode!r}: worker or server-client")
    return doc


def random_mrr(negatives: int) -> float:
    """The MRR of a random ranking of a positive among ``negatives`` negatives."""
    return sum(1 / r for r in range(1, negatives + 2)) / (negatives + 1)


def _write_fresh_ogb_link(root: Path) -> None:
    """A small learnable citation graph in ogbl-citation2's raw layout: valid and test
    citations with LINK_NEGATIVES fixed negative targets each, every edge in the edge list."""
    from distgnn_api.link import SyntheticLinkDataset
    from distgnn_workload.data.ogb_link import write_ogb_link
    from distgnn_workload.data.synthetic_link import generate_link

    g = generate_link(SyntheticLinkDataset.model_validate(LINK))
    edges = np.stack([g.src, g.dst], axis=1).astype(np.int64)
    rng = np.random.default_rng(0)
    held = rng.permutation(len(edges))[: 2 * LINK_HELD_OUT]
    train = np.ones(len(edges), dtype=bool)
    train[held] = False
    splits: dict[str, dict[str, Any]] = {
        "train": {"source_node": edges[train, 0], "target_node": edges[train, 1]}
    }
    for name, ids in (("valid", held[:LINK_HELD_OUT]), ("test", held[LINK_HELD_OUT:])):
        splits[name] = {
            "source_node": edges[ids, 0],
            "target_node": edges[ids, 1],
            "target_node_neg": rng.integers(0, g.num_nodes, (len(ids), LINK_NEGATIVES)),
        }
    write_ogb_link(root, edges, g.x, splits)


_WRITTEN: dict[str, tuple[Path, list[Path]]] = {}
"""Where this process wrote each kind of OGB files, and which: a copy of them serves the
next example that asks (seconds of CPU less than generating them again)."""


def _write_once(kind: str, root: Path, write: Callable[[], None]) -> None:
    """``write()`` the files of ``kind`` under ``root``, or copy them from where they were."""
    if kind in _WRITTEN:
        source, files = _WRITTEN[kind]
        if source != root and all((source / f).is_file() for f in files):
            for f in files:
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / f, root / f)
            return
    write()
    _WRITTEN[kind] = (root, [p.relative_to(root) for p in root.rglob("*") if p.is_file()])


def _write_ogb_link(root: Path) -> None:
    _write_once("link", root, lambda: _write_fresh_ogb_link(root))


def _write_ogb(root: Path, scheme: str) -> None:
    """A small learnable graph in OGB's raw format, where the example expects its dataset."""
    _write_once(f"node-{scheme}", root, lambda: _write_fresh_ogb(root, scheme))


def _write_fresh_ogb(root: Path, scheme: str) -> None:
    from distgnn_workload.data.csr import edge_pairs
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
    hetero = is_hetero(doc)  # before the replicas drop below numPartitions
    if hetero:
        spec["dataset"] = _reduced_hetero(dataset)
    elif "synthetic" in dataset:
        dataset["synthetic"] = {**(dataset["synthetic"] or {}), **GRAPH}
    elif "ogb" in dataset and "linkPrediction" in spec:
        _write_ogb_link(data_dir / dataset["ogb"]["path"])
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
    if hetero:  # one partition per holder, whose count may have dropped above
        spec.get("partition", {}).pop("numPartitions", None)
    spec["training"].update({"epochs": EPOCHS, "evalEvery": 1})
    spec.pop("storage", None)
    if "linkPrediction" in spec:
        evaluation = spec["linkPrediction"].setdefault("evaluation", {})
        negatives = evaluation.get("negatives", LINK_NEGATIVES)
        if not isinstance(negatives, int):
            raise ValueError(f"evaluation.negatives {negatives!r}: extend gpu_examples")
        evaluation["negatives"] = min(negatives, LINK_NEGATIVES)
        evaluation["maxPositives"] = min(
            evaluation.get("maxPositives", LINK_POSITIVES), LINK_POSITIVES
        )
    return doc


def min_test_mrr(doc: dict[str, Any]) -> float:
    """What the reduced link example's test MRR must exceed: LINK_MRR_FACTOR times a random
    ranking's among its evaluation negatives."""
    link = parse_job(doc).spec.link_prediction
    if link is None or not isinstance(link.evaluation.negatives, int):
        raise ValueError("a link-prediction job ranking against a number of negatives")
    return LINK_MRR_FACTOR * random_mrr(link.evaluation.negatives)


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
