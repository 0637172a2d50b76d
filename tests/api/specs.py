"""Specs for the API's unit tests: a base spec with some of its sections changed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distgnn_api.spec import DistGNNJobSpec, parse_spec


def spec_from(base: Mapping[str, Mapping[str, Any]], **changes: Any) -> DistGNNJobSpec:
    """``base`` parsed, each keyword's fields merged into that top-level section."""
    data = {k: dict(v) for k, v in base.items()}
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value}
    return parse_spec(data)
