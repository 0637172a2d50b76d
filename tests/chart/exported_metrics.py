"""The Prometheus series that distgnn's code exports, read from its metric objects."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from prometheus_client.metrics import MetricWrapperBase

# Series a metric family of each type exposes, by suffix (prometheus-client's exposition).
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
    "stateset": ("",),
    "enum": ("",),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
}


@dataclass(frozen=True)
class Series:
    """One exported series name: its family's type and label names."""

    name: str
    type: str
    labels: frozenset[str]


def exported_series(*modules: ModuleType) -> dict[str, Series]:
    """Every series name the modules' metric objects expose."""
    out: dict[str, Series] = {}
    for module in modules:
        for obj in vars(module).values():
            if not isinstance(obj, MetricWrapperBase):
                continue
            labels = set(obj._labelnames)
            for family in obj.describe():
                for suffix in _SUFFIXES[family.type]:
                    extra = {"le"} if suffix == "_bucket" else set()
                    out[family.name + suffix] = Series(
                        family.name + suffix, family.type, frozenset(labels | extra)
                    )
    return out
