"""Specs for the API's unit tests: a base spec with some of its sections changed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distgnn_api.spec import DistGNNJobSpec, parse_spec


def spec_from(base: Mapping[str, Mapping[str, Any]], **changes: Any) -> DistGNNJobSpec:
    """``base`` parsed, each keyword's fields merged into that top-level section."""
    data = {k: dict(v) for k, v in base.items()}
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value}
    return parse_spec(data)


def write_shop_store_meta(folder: Path, **extra: Any) -> None:
    """A typed store's META.json (workload/partition/meta.py HeteroPartitionMeta's keys) in
    ``folder``: items (24 features) bought by featureless users, 30,000 edges each way;
    ``extra`` keys added or replaced."""
    meta = {
        "graph_kind": "hetero",
        "node_types": ["item", "user"],
        "node_counts": {"item": 4_000, "user": 10_000},
        "num_features": {"item": 24, "user": 0},
        "edge_counts": {"user__buys__item": 30_000, "item__rev_buys__user": 30_000},
        "num_classes": 5,
        "num_train_nodes": 2_000,
        "edge_cut_fraction": 0.4,
        **extra,
    }
    (folder / "META.json").write_text(json.dumps(meta))
