"""Where each learnable embedding table's shard lives (``spec.trainers.embeddingMemory``):
in GPU memory, or in pinned host memory that the GPU reads and updates in place (UVA).

A shard takes its rows and its optimizer's per-row state (fp32). Within the budget the
smallest shards stay on the GPU first; the rest go to the host whole. The rule is
:mod:`distgnn_api.feature_memory`'s, which ``distgnn plan`` applies too.
"""

from __future__ import annotations

from distgnn_api.feature_memory import host_shards, shard_bytes

__all__ = ["host_shards", "shard_bytes"]
