"""One training process of a heterogeneous job, wired: the typed store, the loop, the result.

Worker mode only, for now: trainer pod ``p`` serves partition ``p`` of the typed store (its
seeds, and the rows of the learnt embeddings of the nodes it owns). Every trainer reads the
store's whole typed topology and the features of every featured node, so sampling and
feature gathers are local; the embeddings are the only state sharded over the ranks.
"""

from __future__ import annotations

import gc
import logging
import time
from pathlib import Path

from distgnn_api.contract import EXIT_OK
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.partition.hetero_store import HeteroPartitionStore
from distgnn_workload.partition.store import StoreError
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.lifecycle import BadInputError
from distgnn_workload.runtime.seeds import holder_ranks
from distgnn_workload.runtime.status_server import ProgressTracker
from distgnn_workload.trainer.hetero_data import from_store
from distgnn_workload.trainer.hetero_loop import HeteroTrainer
from distgnn_workload.trainer.process import finish, keep_job_config

log = logging.getLogger(__name__)

WORKER_MODE_ONLY = (
    "spec.samplers.replicas: heterogeneous jobs run in worker mode for now (the trainers "
    "sample their own partitions); set samplers.replicas to 0"
)


def check_mode(spec: DistGNNJobSpec) -> None:
    """A heterogeneous job with sampler servers is refused, naming the field to change."""
    if spec.dataset.hetero_section is not None and not spec.worker_mode:
        raise BadInputError(WORKER_MODE_ONLY)


def open_store(path: Path, num_trainers: int) -> HeteroPartitionStore:
    try:
        store = HeteroPartitionStore.open(path)
    except StoreError as err:
        raise BadInputError(str(err)) from None
    if store.num_partitions != num_trainers:
        raise BadInputError(
            f"the typed store at {path} has {store.num_partitions} partitions but the job has "
            f"{num_trainers} trainer pods; in worker mode spec.partition.numPartitions must "
            "equal spec.trainers.replicas"
        )
    return store


def run(
    proc: RoleProcess,
    *,
    progress_file: Path | None = None,
    serve_status: bool = True,
    started_at: float | None = None,
) -> int:
    """Run one training process of a heterogeneous job to completion; the exit code."""
    started_at = started_at or time.time()
    env, spec = proc.env, proc.spec
    check_mode(spec)
    device = proc.pick_device()
    rank, ppp = proc.rank, env.procs_per_pod
    world = env.num_trainers * ppp
    tracker = ProgressTracker(spec.training.epochs, mirror=progress_file)
    if serve_status:
        proc.serve_status(progress=tracker)
    store = open_store(env.partition_dir, env.num_trainers)
    if rank == 0:
        keep_job_config(proc)
    t0 = time.perf_counter()
    data = from_store(store)
    log.info(
        "typed graph: %s nodes, %d edge types, target %s (%d classes); read in %.1f s",
        data.node_counts,
        len(data.edge_types),
        data.target_node_type,
        data.num_classes,
        time.perf_counter() - t0,
    )
    proc.join(rpc_threads=4)
    ranks_of = holder_ranks(env.num_trainers, world, worker_mode=True, procs_per_pod=ppp)
    proc.serving()
    trainer = HeteroTrainer(
        spec,
        data,
        rank=rank,
        world_size=world,
        device=device,
        ranks_of_holder=ranks_of,
        collectives=proc.collectives,
        run_dir=env.run_dir,
        job_uid=env.job_uid,
        tracker=tracker,
        started_at=started_at,
    )
    trainer.resume()
    trainer.hetero.prepare(spec.training.batch_size)
    gc.collect()
    gc.freeze()
    proc.collectives.barrier(env.rendezvous_timeout_s, "start of training")
    finish(proc, trainer)
    return EXIT_OK
