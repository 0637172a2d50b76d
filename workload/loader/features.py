"""Where a mini-batch's node features come from: the ``FeatureSource`` protocol."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor


@runtime_checkable
class FeatureSource(Protocol):
    """Gives the feature rows of global node ids, on the training device.

    The local implementation indexes one tensor; a distributed one combines a local slice,
    a hot-node cache and remote fetches. ``gather`` may be called from a background thread
    (under a side CUDA stream), one call at a time.
    """

    @property
    def num_features(self) -> int:
        """Feature width F."""
        ...

    def gather(self, node_ids: Tensor) -> Tensor:
        """``[len(node_ids), F]`` features of the global ``node_ids``, on the training device."""
        ...


def _as_tensor(array: Tensor | np.ndarray) -> Tensor:
    return torch.from_numpy(np.asarray(array)) if isinstance(array, np.ndarray) else array


class LocalFeatureSource:
    """All features (and labels) in one tensor, indexed by global id.

    ``features`` is stored on ``storage_device`` (default: ``device``, so the whole table
    lives on the GPU when it fits) in ``dtype`` (default: unchanged; bf16 halves the gather
    traffic for bf16 training). From CPU storage to a CUDA device the gathered rows go
    through pinned memory with an asynchronous copy.
    """

    def __init__(
        self,
        features: Tensor | np.ndarray,
        labels: Tensor | np.ndarray | None,
        device: torch.device | str,
        *,
        dtype: torch.dtype | None = None,
        storage_device: torch.device | str | None = None,
    ) -> None:
        feats = _as_tensor(features)
        if feats.dim() != 2:
            raise ValueError(f"features must be [num_nodes, num_features], got {list(feats.shape)}")
        self.device = torch.device(device)
        self.storage_device = torch.device(storage_device) if storage_device else self.device
        self.features = feats.to(self.storage_device, dtype or feats.dtype)
        self.labels: Tensor | None = None
        if labels is not None:
            lab = _as_tensor(labels)
            if lab.shape[0] != feats.shape[0]:
                raise ValueError(
                    f"labels has {lab.shape[0]} rows but features has {feats.shape[0]}"
                )
            self.labels = lab.to(self.device, torch.int64)
        self._pin = self.storage_device.type == "cpu" and self.device.type == "cuda"

    @property
    def num_features(self) -> int:
        return int(self.features.size(1))

    @property
    def num_nodes(self) -> int:
        return int(self.features.size(0))

    def gather(self, node_ids: Tensor) -> Tensor:
        rows = self.features.index_select(0, node_ids.to(self.storage_device))
        if self._pin:
            rows = rows.pin_memory()
        return rows.to(self.device, non_blocking=True)

    def gather_labels(self, node_ids: Tensor) -> Tensor:
        """Labels of the global ``node_ids`` on the training device."""
        if self.labels is None:
            raise ValueError("this LocalFeatureSource was built without labels")
        return self.labels.index_select(0, node_ids.to(self.device))
