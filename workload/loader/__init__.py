"""Mini-batch loading: sampled subgraph + features + labels, prefetched asynchronously.

``BatchLoader`` drives a sampler and a ``FeatureSource`` (``LocalFeatureSource`` here; the
distributed runtime supplies one that fetches remote rows) and yields ``MiniBatch``es.
``Prefetcher`` is the background-thread/side-stream machinery, reusable for other producers.
"""

from distgnn_workload.loader.batch_loader import (
    BatchLoader,
    HeteroMiniBatch,
    MiniBatch,
    Prefetcher,
    Sampler,
)
from distgnn_workload.loader.features import FeatureSource, LocalFeatureSource

__all__ = [
    "BatchLoader",
    "FeatureSource",
    "HeteroMiniBatch",
    "LocalFeatureSource",
    "MiniBatch",
    "Prefetcher",
    "Sampler",
]
