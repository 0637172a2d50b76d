"""What one rank of a heterogeneous job is given, as one bundle for both typed trainers
(:class:`~distgnn_workload.trainer.hetero_loop.HeteroTrainer` and
:class:`~distgnn_workload.trainer.hetero_link_loop.HeteroLinkTrainer`), and the worker-mode
pipeline they build from it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from distgnn_api.edge_types import EdgeType
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.runtime.ddp import Collectives
from distgnn_workload.runtime.status_server import ProgressTracker
from distgnn_workload.sampling.hetero_sampler import HeteroNeighborSampler
from distgnn_workload.trainer.hetero_data import HeteroTrainingData
from distgnn_workload.trainer.hetero_pipeline import HeteroBatches, HeteroPipeline, TypedFeatures


@dataclass(frozen=True)
class HeteroRank:
    """One rank's place in the job and where its batches and features come from.

    ``batches``: the sampler servers' pipeline (None: sampled here, worker mode);
    ``features``: the other holders' featured rows (None: all local); ``partition_dir``: the
    typed store that full-neighbourhood evaluation reads what the training data lacks from
    (None: the contract's partition directory).
    """

    rank: int
    world_size: int
    device: torch.device
    ranks_of_holder: list[list[int]]
    run_dir: Path
    job_uid: str
    collectives: Collectives | None = None
    tracker: ProgressTracker | None = None
    on_epoch: Callable[[], None] | None = None
    started_at: float | None = None
    batches: HeteroBatches | None = None
    features: TypedFeatures | None = None
    partition_dir: Path | None = None

    def input_dtype(self, spec: DistGNNJobSpec) -> torch.dtype:
        """bf16 where the spec asks for it and the rank trains on a GPU, else fp32."""
        bf16 = spec.training.bf16 and self.device.type == "cuda"
        return torch.bfloat16 if bf16 else torch.float32

    def worker_pipeline(
        self,
        spec: DistGNNJobSpec,
        data: HeteroTrainingData,
        fanouts: Mapping[EdgeType, Sequence[int]],
        sampler: HeteroNeighborSampler | None = None,
    ) -> HeteroPipeline:
        """This rank's batches sampled here (see :class:`HeteroPipeline` for ``sampler``)."""
        return HeteroPipeline(
            data,
            fanouts,
            rank=self.rank,
            seed=spec.training.seed,
            device=self.device,
            input_dtype=self.input_dtype(spec),
            features=self.features,
            sampler=sampler,
        )
