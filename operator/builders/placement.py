"""Where Kueue placed a pod set: the node labels and tolerations of the ResourceFlavors it
assigned, plus what its admission checks add. Merged into a role's pod template the way
Kueue's own integrations merge them (podset.Merge): the job's own values stay, Kueue's are
added."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Placement:
    """What an admission adds to one pod set's pods."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


class PlacementConflict(ValueError):
    """Kueue's node selector contradicts the job's own (spec.scheduling.nodeSelector)."""


def place(meta: dict[str, Any], spec: dict[str, Any], placement: Placement | None) -> None:
    """Merge a placement into a pod template's metadata and spec, in place."""
    if placement is None:
        return
    selector: dict[str, str] = dict(spec.get("nodeSelector") or {})
    for key, value in placement.node_selector.items():
        if selector.get(key, value) != value:
            raise PlacementConflict(
                f"spec.scheduling.nodeSelector sets {key}={selector[key]} but the flavor Kueue "
                f"assigned needs {key}={value}; drop the key or queue the job where it fits"
            )
        selector[key] = value
    if selector:
        spec["nodeSelector"] = selector
    tolerations = list(spec.get("tolerations") or [])
    for toleration in placement.tolerations:
        if dict(toleration) not in tolerations:
            tolerations.append(dict(toleration))
    if tolerations:
        spec["tolerations"] = tolerations
    for key, values in (("labels", placement.labels), ("annotations", placement.annotations)):
        if values:
            meta[key] = {**values, **(meta.get(key) or {})}
