"""The trainer's Prometheus series for one rank."""

from __future__ import annotations

from distgnn_workload import metrics


class TrainerMetrics:
    """The trainer's Prometheus series for one rank."""

    def __init__(self, rank: int) -> None:
        label = str(rank)
        self.seeds = metrics.TRAINER_SEEDS.labels(label)
        self.edges = metrics.TRAINER_SAMPLED_EDGES.labels(label)
        self.nodes = metrics.TRAINER_SAMPLED_NODES.labels(label)
        self.step = metrics.TRAINER_STEP_SECONDS.labels(label)
        self.wait = metrics.TRAINER_DATA_WAIT_SECONDS.labels(label)
        self.epoch = metrics.TRAINER_EPOCH.labels(label)
        self.loss = metrics.TRAINER_LOSS.labels(label)
        self.val = metrics.TRAINER_ACCURACY.labels(label, "val")
        self.test = metrics.TRAINER_ACCURACY.labels(label, "test")
        self.remote_bytes = metrics.TRAINER_REMOTE_FEATURE_BYTES.labels(label)
        self.cache_hits = metrics.TRAINER_CACHE_HITS.labels(label)
        self.cache_lookups = metrics.TRAINER_CACHE_LOOKUPS.labels(label)
