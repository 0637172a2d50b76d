"""The trainer's Prometheus series for one rank."""

from __future__ import annotations

import logging
from typing import Any

from distgnn_workload import metrics

log = logging.getLogger(__name__)


class TrainerMetrics:
    """The trainer's Prometheus series for one rank. Counters start at a true 0; the loss,
    each split's accuracy, the feature-cache and the embedding counters appear once they
    have a value."""

    def __init__(self, rank: int) -> None:
        label = self.label = str(rank)
        self.seeds = metrics.TRAINER_SEEDS.labels(label)
        self.edges = metrics.TRAINER_SAMPLED_EDGES.labels(label)
        self.nodes = metrics.TRAINER_SAMPLED_NODES.labels(label)
        self.step = metrics.TRAINER_STEP_SECONDS.labels(label)
        self.wait = metrics.TRAINER_DATA_WAIT_SECONDS.labels(label)
        self.epoch = metrics.TRAINER_EPOCH.labels(label)
        self.remote_bytes = metrics.TRAINER_REMOTE_FEATURE_BYTES.labels(label)
        self._lookups = self._hits = self._tier_rows = self._host_rows = 0

    @property
    def loss(self) -> Any:
        return metrics.TRAINER_LOSS.labels(self.label)

    def accuracy(self, split: str) -> Any:
        return metrics.TRAINER_ACCURACY.labels(self.label, split)

    def full_accuracy(self, split: str) -> Any:
        return metrics.TRAINER_FULL_ACCURACY.labels(self.label, split)

    def link_figures(self, split: str, mrr: float, hits: dict[int, float]) -> None:
        """Publish a split's ranking figures."""
        metrics.TRAINER_LINK_MRR.labels(self.label, split).set(mrr)
        for k, value in hits.items():
            metrics.TRAINER_LINK_HITS.labels(self.label, split, str(k)).set(value)

    def feature_stats(self, lookups: int, hits: int, fetched: int) -> None:
        """Count remote feature traffic; the cache series start with the first look-up."""
        self.remote_bytes.inc(fetched)
        if lookups:
            metrics.TRAINER_CACHE_LOOKUPS.labels(self.label).inc(lookups)
            metrics.TRAINER_CACHE_HITS.labels(self.label).inc(hits)
            self._lookups += lookups
            self._hits += hits
            metrics.TRAINER_CACHE_HIT_RATIO.labels(self.label).set(self._hits / self._lookups)

    def tier_stats(self, rows: int, host: int) -> None:
        """Count a tiered table's gathered rows and those read from its pinned host tier."""
        if rows:
            metrics.TRAINER_FEATURE_TIER_ROWS.labels(self.label, "gpu").inc(rows - host)
            metrics.TRAINER_FEATURE_TIER_ROWS.labels(self.label, "host").inc(host)
            self._tier_rows += rows
            self._host_rows += host
            ratio = 1.0 - self._host_rows / self._tier_rows
            metrics.TRAINER_FEATURE_GPU_TIER_HIT_RATIO.labels(self.label).set(ratio)
            log.info("feature table: %.1f%% of gathered rows from its GPU tier", 100.0 * ratio)

    def feature_figures(self) -> dict[str, float]:
        """The hit ratios since the start, for ``/progress`` (those with a look-up yet)."""
        out: dict[str, float] = {}
        if self._lookups:
            out["feature_cache_hit_ratio"] = self._hits / self._lookups
        if self._tier_rows:
            out["feature_gpu_tier_hit_ratio"] = 1.0 - self._host_rows / self._tier_rows
        return out

    def typed_feature_stats(self, node_type: str, lookups: int, hits: int, fetched: int) -> None:
        """Count one node type's look-ups of other partitions' rows and the cache's hits."""
        self.remote_bytes.inc(fetched)
        if lookups:
            metrics.TRAINER_TYPED_FEATURE_LOOKUPS.labels(self.label, node_type).inc(lookups)
            metrics.TRAINER_TYPED_FEATURE_CACHE_HITS.labels(self.label, node_type).inc(hits)
            ratio = metrics.TRAINER_TYPED_FEATURE_CACHE_HIT_RATIO.labels(self.label, node_type)
            ratio.set(hits / lookups)

    def embedding_rows(self, node_type: str, rows: int, remote: int) -> None:
        """Count a training step's embedding lookup of ``node_type``: distinct rows, and
        those other trainers sent."""
        metrics.TRAINER_EMBEDDING_ROWS.labels(self.label, node_type).inc(rows)
        metrics.TRAINER_EMBEDDING_REMOTE_ROWS.labels(self.label, node_type).inc(remote)
