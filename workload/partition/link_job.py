"""The partition Job's path for a link-prediction job: load the graph's edges, split them
(:mod:`.link_edges`), partition the training topology and write the store with the split
(:mod:`.link_split`) in it, published together so that every process reads the same split.

The store's message-passing topology is the training pairs only, undirected; its node
masks mark the sources of the training, valid and test positives (the train mask weighs the
partitioner's balance of training work, as the train positives go to the owner of their
source). Labels are all 0 (one class): a link job has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

import numpy as np

from distgnn_api.contract import JobConfig
from distgnn_workload.data.csr import csr_from_edge_keys
from distgnn_workload.data.graph import GraphData
from distgnn_workload.data.link_data import LinkData
from distgnn_workload.partition import stages
from distgnn_workload.partition.link_edges import EdgeSplitResult, split_edges
from distgnn_workload.partition.link_split import (
    LINK_META_KEY,
    TASK_KEY,
    TASK_LINK,
    write_link_split,
)
from distgnn_workload.partition.meta import NEW_IDS_FILE
from distgnn_workload.partition.store import PartitionStore


def link_graph(data: LinkData, split: EdgeSplitResult) -> GraphData:
    """The training topology as a :class:`GraphData` in dataset ids."""
    n = data.num_nodes
    indptr, indices = csr_from_edge_keys(split.topology_keys, n)

    def sources(name: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
        mask = np.zeros(n, dtype=np.bool_)
        mask[split.split(name).src] = True
        return mask

    graph = GraphData(
        indptr=indptr,
        indices=indices,
        x=data.x,
        y=np.zeros(n, dtype=np.int64),
        train_mask=sources("train"),
        val_mask=sources("valid"),
        test_mask=sources("test"),
        num_classes=1,
        name=data.name,
        info={**data.info, **split.info},
    )
    graph.validate()
    return graph


def partition_link(
    data_dir: Path, target: Path, config: JobConfig, out: TextIO
) -> tuple[PartitionStore, dict[str, float]]:
    """Load (paths relative to the volume at ``data_dir``), split, partition and write a
    link-prediction job's store at ``target``; returns it and the seconds of each step."""
    from distgnn_workload.data.dataset import dataset_kind
    from distgnn_workload.data.link_dataset import load_link_dataset

    spec = config.spec
    lp = spec.link_prediction
    assert lp is not None  # admission: task linkPrediction has its section
    kind = dataset_kind(spec.dataset)
    data, load_s = stages.load_stage(
        kind.startswith("synthetic"),
        lambda progress: load_link_dataset(
            spec.dataset, data_dir, read_split=lp.split.from_dataset, progress=progress
        ),
        out,
    )
    split = split_edges(data, lp, spec.partition.seed)
    graph = link_graph(data, split)
    del data

    def add_split(root: Path, meta: dict[str, Any]) -> None:
        new_ids = np.load(root / NEW_IDS_FILE)
        offsets = np.asarray(meta["offsets"], dtype=np.int64)
        meta[LINK_META_KEY] = write_link_split(root, split, new_ids, offsets)

    store, assign_s, write_s = stages.partition_graph(
        graph, target, config, out, extra_meta={TASK_KEY: TASK_LINK}, extra_writer=add_split
    )
    steps = {"generate" if kind.startswith("synthetic") else "load": load_s}
    steps.update(partition=assign_s, write=write_s)
    return store, steps
