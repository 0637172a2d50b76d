"""What one rank of a job is given, as one bundle for every trainer: its place among the
ranks, its run and the sources of its batches and features; and the typed worker-mode
pipeline that the typed trainers build from it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypedDict, TypeVar

import torch

from distgnn_api.edge_types import EdgeType
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.runtime.batches import HeteroBatches, HeteroPipeline, TypedFeatures
from distgnn_workload.runtime.ddp import Collectives
from distgnn_workload.runtime.status_server import ProgressTracker
from distgnn_workload.runtime.training_data import HeteroTrainingData
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler
from distgnn_workload.trainer.step_policy import cuda_graph_setting

B = TypeVar("B")


def input_dtype(spec: DistGNNJobSpec, device: torch.device) -> torch.dtype:
    """bf16 where the spec asks for it and ``device`` is a GPU, else fp32."""
    return torch.bfloat16 if spec.training.bf16 and device.type == "cuda" else torch.float32


class LoopArgs(TypedDict):
    """The rank's part of :class:`~distgnn_workload.trainer.loop.Trainer`'s arguments."""

    rank: int
    world_size: int
    device: torch.device
    ranks_of_holder: list[list[int]]
    collectives: Collectives | None
    run_dir: Path
    job_uid: str
    tracker: ProgressTracker | None
    on_epoch: Callable[[], None] | None
    started_at: float | None


@dataclass(frozen=True)
class TrainerRank(Generic[B]):
    """One rank's place in the job and where its batches and features come from.

    ``batches``: the rank's batch pipeline (typed jobs: None, sampled here in worker mode);
    ``features``: the other holders' featured rows of a typed job (None: all local);
    ``partition_dir``: the typed store that full-neighbourhood evaluation reads what the
    training data lacks from (None: the contract's partition directory).
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
    batches: B | None = None
    features: TypedFeatures | None = None
    partition_dir: Path | None = None

    def loop_args(self) -> LoopArgs:
        """What the training loop takes of this bundle."""
        return LoopArgs(
            rank=self.rank,
            world_size=self.world_size,
            device=self.device,
            ranks_of_holder=self.ranks_of_holder,
            collectives=self.collectives,
            run_dir=self.run_dir,
            job_uid=self.job_uid,
            tracker=self.tracker,
            on_epoch=self.on_epoch,
            started_at=self.started_at,
        )

    def holders(self) -> list[int]:
        """The holders whose seeds this rank draws: in server-client mode, the sampler
        servers it asks for batches."""
        return [h for h, ranks in enumerate(self.ranks_of_holder) if self.rank in ranks]

    def input_dtype(self, spec: DistGNNJobSpec) -> torch.dtype:
        """bf16 where the spec asks for it and the rank trains on a GPU, else fp32."""
        return input_dtype(spec, self.device)

    def worker_pipeline(
        self,
        spec: DistGNNJobSpec,
        data: HeteroTrainingData,
        fanouts: Mapping[EdgeType, Sequence[int]],
        sampler: HeteroNeighborSampler | None = None,
    ) -> HeteroPipeline:
        """This rank's typed batches sampled here (see :class:`HeteroPipeline` for
        ``sampler``)."""
        return HeteroPipeline(
            data,
            fanouts,
            rank=self.rank,
            seed=spec.training.seed,
            device=self.device,
            input_dtype=self.input_dtype(spec),
            features=self.features,
            sampler=sampler,
            # DISTGNN_CUDA_GRAPH=static: the fixed-shape execution on a CPU too (for tests)
            static_sampler=True if cuda_graph_setting() == "static" else None,
        )


TypedRank = TrainerRank[HeteroBatches]
"""A typed job's rank: typed batches from the sampler servers, or (None) sampled here."""
