"""Prometheus metrics of the workload: module-level objects with the ``distgnn_`` prefix.

This module imports prometheus_client only (no torch), so that the dashboard test can list
what the workload exports. Every object is labelled, so a series appears only when a role
calls ``.labels(...)``: roles do that when the value exists (the loss after an epoch, an
accuracy after its evaluation, a cache ratio after a look-up), never to publish a 0 that
was not measured. The partition figures are not here: the partition Job exits before a
scrape, so the operator exports them (``distgnn_operator.metrics``).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

# Latency buckets from 1 ms to 10 s: a mini-batch step on a GPU is a few ms.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _gpu_tier_hit_ratio(role: str) -> Gauge:
    """A role's share of a tiered feature table's gathered rows that its GPU tier held."""
    return Gauge(
        f"distgnn_{role}_feature_gpu_tier_hit_ratio",
        "Share of a tiered table's gathered rows that its GPU tier held, since the start.",
        ["rank"],
    )


def _typed_feature_cache(role: str, ratio_since: str) -> tuple[Counter, Counter, Gauge]:
    """A role's look-ups of other partitions' featured rows per node type (heterogeneous
    jobs), those its hot cache served, and the hit ratio ``ratio_since``."""
    labels = ["rank", "node_type"]
    return (
        Counter(
            f"distgnn_{role}_typed_feature_lookups_total",
            "Look-ups of featured rows that other partitions own, per node type.",
            labels,
        ),
        Counter(
            f"distgnn_{role}_typed_feature_cache_hits_total",
            "Look-ups of other partitions' featured rows served by the hot cache, per node type.",
            labels,
        ),
        Gauge(
            f"distgnn_{role}_typed_feature_cache_hit_ratio",
            f"Hit ratio of the hot-feature cache {ratio_since}, per node type.",
            labels,
        ),
    )


# ---- trainer (label rank: the global training process rank)
TRAINER_SEEDS = Counter("distgnn_trainer_seeds_total", "Seed nodes trained on.", ["rank"])
TRAINER_SAMPLED_EDGES = Counter(
    "distgnn_trainer_sampled_edges_total", "Sampled edges in trained mini-batches.", ["rank"]
)
TRAINER_SAMPLED_NODES = Counter(
    "distgnn_trainer_sampled_nodes_total", "Sampled nodes in trained mini-batches.", ["rank"]
)
TRAINER_STEP_SECONDS = Histogram(
    "distgnn_trainer_step_seconds",
    "Wall time of one training step, data wait included.",
    ["rank"],
    buckets=_LATENCY_BUCKETS,
)
TRAINER_DATA_WAIT_SECONDS = Histogram(
    "distgnn_trainer_data_wait_seconds",
    "Time a training step waited for its mini-batch.",
    ["rank"],
    buckets=_LATENCY_BUCKETS,
)
TRAINER_EPOCH = Gauge("distgnn_trainer_epoch", "Epochs completed.", ["rank"])
TRAINER_LOSS = Gauge("distgnn_trainer_loss", "Mean training loss of the last epoch.", ["rank"])
TRAINER_ACCURACY = Gauge(
    "distgnn_trainer_accuracy",
    "Accuracy of the last sampled evaluation (neighbourhoods at the training fanout).",
    ["rank", "split"],
)
TRAINER_FULL_ACCURACY = Gauge(
    "distgnn_trainer_full_neighbourhood_accuracy",
    "Accuracy of the last full-neighbourhood (layer-wise, all nodes) evaluation.",
    ["rank", "split"],
)
TRAINER_LINK_MRR = Gauge(
    "distgnn_trainer_link_mrr",
    "Link prediction: mean reciprocal rank of the last ranking evaluation.",
    ["rank", "split"],
)
TRAINER_LINK_HITS = Gauge(
    "distgnn_trainer_link_hits",
    "Link prediction: Hits@K (share of positives ranked at most K) of the last evaluation.",
    ["rank", "split", "k"],
)
TRAINER_REMOTE_FEATURE_BYTES = Counter(
    "distgnn_trainer_remote_feature_bytes_total",
    "Bytes of node features fetched from other partitions.",
    ["rank"],
)
TRAINER_CACHE_HITS = Counter(
    "distgnn_trainer_feature_cache_hits_total", "Remote features served by the hot cache.", ["rank"]
)
TRAINER_CACHE_LOOKUPS = Counter(
    "distgnn_trainer_feature_cache_lookups_total", "Remote feature look-ups.", ["rank"]
)
TRAINER_CACHE_HIT_RATIO = Gauge(
    "distgnn_trainer_feature_cache_hit_ratio",
    "Share of remote feature look-ups the hot cache served, since the start.",
    ["rank"],
)
# a feature table over its GPU budget (samplers.featureMemory): rows from each tier
TRAINER_FEATURE_TIER_ROWS = Counter(
    "distgnn_trainer_feature_tier_rows_total",
    "Feature rows gathered from a tiered table, by tier (gpu, host: pinned, read in place).",
    ["rank", "tier"],
)
TRAINER_FEATURE_GPU_TIER_HIT_RATIO = _gpu_tier_hit_ratio("trainer")
# heterogeneous jobs in worker mode: other partitions' featured rows (label node_type)
(
    TRAINER_TYPED_FEATURE_LOOKUPS,
    TRAINER_TYPED_FEATURE_CACHE_HITS,
    TRAINER_TYPED_FEATURE_CACHE_HIT_RATIO,
) = _typed_feature_cache("trainer", "in the last epoch")
# heterogeneous jobs: the learnt embeddings of featureless node types (label node_type)
TRAINER_EMBEDDING_ROWS = Counter(
    "distgnn_trainer_embedding_rows_total",
    "Distinct embedding rows looked up by training steps, per featureless node type.",
    ["rank", "node_type"],
)
TRAINER_EMBEDDING_REMOTE_ROWS = Counter(
    "distgnn_trainer_embedding_remote_rows_total",
    "Embedding rows of training steps' lookups that other trainers sent, per node type.",
    ["rank", "node_type"],
)

# ---- sampler server (label rank: the sampler pod ordinal)
SAMPLER_REQUESTS = Counter(
    "distgnn_sampler_requests_total", "Mini-batch requests served.", ["rank", "kind"]
)
SAMPLER_REQUEST_SECONDS = Histogram(
    "distgnn_sampler_request_seconds",
    "Time to serve one request.",
    ["rank", "kind"],
    buckets=_LATENCY_BUCKETS,
)
SAMPLER_BYTES_SENT = Counter(
    "distgnn_sampler_bytes_sent_total", "Bytes of tensors returned to trainers.", ["rank"]
)
SAMPLER_CACHE_HIT_RATIO = Gauge(
    "distgnn_sampler_cache_hit_ratio", "Hit ratio of the hot-feature cache.", ["rank"]
)
SAMPLER_FEATURE_GPU_TIER_HIT_RATIO = _gpu_tier_hit_ratio("sampler")
# heterogeneous jobs in server-client mode: other partitions' featured rows (label node_type)
(
    SAMPLER_TYPED_FEATURE_LOOKUPS,
    SAMPLER_TYPED_FEATURE_CACHE_HITS,
    SAMPLER_TYPED_FEATURE_CACHE_HIT_RATIO,
) = _typed_feature_cache("sampler", "since the start")
