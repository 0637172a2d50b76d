"""The partition Job: load the job's dataset, partition it, write the store, print a summary.

The path is chosen once, in :func:`run`, by the graph kind, the task and the size: a
heterogeneous dataset (syntheticMag, or ogb/pyg with hetero) takes
:func:`~distgnn_workload.partition.stages.partition_typed`'s path and writes the typed store; a
homogeneous link job :mod:`~distgnn_workload.partition.link_job`'s; a graph larger than
memory :mod:`~distgnn_workload.partition.ooc_job`'s; any other the in-memory one. The reuse
check, the exit codes and the figures are shared.

Reads the contract (``WorkloadEnv`` and the job config at ``DISTGNN_CONFIG``, through
:class:`~distgnn_workload.runtime.bootstrap.RoleProcess`) and writes
``DISTGNN_PARTITION_DIR``. A complete store already there makes the run a no-op (exit 0).
Exit codes follow the contract: 2 when the job config or the dataset is invalid (the
message names the file, line or field), 1 for anything else.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import TextIO

from distgnn_api.contract import (
    ENV_TERMINATION_LOG,
    EXIT_OK,
    STAGE_PARTITION,
    JobConfig,
    PartitionFigures,
    WorkloadEnv,
    emit_progress,
)
from distgnn_api.partition_cost import out_of_core
from distgnn_workload.data.dataset import dataset_kind, dataset_num_nodes, load_dataset
from distgnn_workload.partition import algorithms, ooc_job, probe, stages
from distgnn_workload.partition.link_job import partition_link
from distgnn_workload.partition.meta import META_FILE, StoreError, is_complete
from distgnn_workload.partition.publish import remove_stale_temps, write_json
from distgnn_workload.partition.store import HeteroPartitionStore, PartitionStore
from distgnn_workload.runtime.bootstrap import RoleProcess

log = logging.getLogger("distgnn_workload.partition")

AnyStore = PartitionStore | HeteroPartitionStore


def run(env: WorkloadEnv, config: JobConfig, out: TextIO = sys.stdout) -> int:
    """Partition the job's dataset into ``env.partition_dir``; returns the exit code."""
    spec = config.spec
    target = env.partition_dir
    if target.name != config.partition_key:
        log.warning(
            "partition dir %s does not end in the job's partition key %s; writing there anyway",
            target,
            config.partition_key,
        )
    hetero = spec.dataset.is_hetero
    if is_complete(target):
        try:
            found: AnyStore = (
                HeteroPartitionStore.open(target) if hetero else PartitionStore.open(target)
            )
        except StoreError as err:
            log.warning("replacing an unreadable complete store: %s", err)
        else:
            print(
                f"partition {config.partition_key} is already complete at {target} "
                f"({found.meta.num_partitions} partitions): nothing to do",
                file=out,
            )
            emit_progress(STAGE_PARTITION, 1, 1, stream=out)
            return EXIT_OK
    for stale in remove_stale_temps(target):
        log.info("removed %s, left by an interrupted partitioner", stale)

    k = spec.num_partitions
    known_nodes = dataset_num_nodes(spec.dataset)
    if known_nodes is not None:
        algorithms.check_num_partitions(known_nodes, k)
    if spec.is_link_prediction and not hetero:
        link_store, link_steps = partition_link(env.data_dir, target, config, out)
        return finish(env, config, link_store, link_steps, out)
    if hetero:
        typed, typed_steps = stages.partition_typed(env, config, out)
        write_figures(env, typed, typed_steps)
        return report(typed, stages.typed_summary(typed, typed_steps), out)

    ooc, why = out_of_core(spec, ooc_job.graph_size(spec, env.data_dir))
    log.info("partitioning %s: %s", "out of core" if ooc else "in memory", why)
    if ooc:
        streamed, steps = ooc_job.partition_streamed(env, config, out)
        return finish(env, config, streamed, steps, out)

    kind = dataset_kind(spec.dataset)
    graph, load_s = stages.load_stage(
        kind == "synthetic",
        lambda progress: load_dataset(spec.dataset, env.data_dir, progress=progress),
        out,
    )
    log.info(
        "%s graph: %d nodes, %d edges, %d features, %d classes (%.1f s)",
        kind,
        graph.num_nodes,
        graph.num_undirected_edges,
        graph.num_features,
        graph.num_classes,
        load_s,
    )
    store, assign_s, write_s = stages.partition_graph(graph, target, config, out)
    steps = {
        "generate" if kind == "synthetic" else "load": load_s,
        "partition": assign_s,
        "write": write_s,
    }
    return finish(env, config, store, steps, out)


def finish(
    env: WorkloadEnv,
    config: JobConfig,
    store: PartitionStore,
    steps: dict[str, float],
    out: TextIO,
) -> int:
    """Probe the written store, leave the figures, report the cut and print the summary."""
    t = time.perf_counter()
    found = probe.probe(store, config.spec, seed=config.spec.partition.seed)
    if found is not None:
        meta = json.loads((store.path / META_FILE).read_text())
        meta[probe.META_KEY] = found
        write_json(store.path / META_FILE, meta)
        steps["probe"] = time.perf_counter() - t
        log.info(
            "sampling probe: %.0f distinct nodes per batch, %.0f remote, cache hit rate %.2f",
            found["distinct_nodes"],
            found["remote_nodes"],
            found["cache_hit_rate"],
        )
    write_figures(env, store, steps)
    return report(store, summary(store, steps), out)


def report(store: AnyStore, text: str, out: TextIO) -> int:
    """The last progress event (with the edge cut) and the store's summary; the exit code."""
    emit_progress(
        STAGE_PARTITION,
        1.0,
        1.0,
        stream=out,
        edge_cut=float(store.meta.edge_cut),
        edge_cut_fraction=store.meta.edge_cut_fraction,
    )
    print(text, file=out)
    return EXIT_OK


def write_figures(env: WorkloadEnv, store: AnyStore, steps: dict[str, float]) -> None:
    """Leave the figures where ENV_TERMINATION_LOG says: the container's termination message,
    which the operator keeps and exports (this short-lived process is not scraped)."""
    path = env.termination_log
    if path is None:
        return
    m = store.meta
    figures = PartitionFigures(
        num_partitions=m.num_partitions,
        algorithm=m.algorithm,
        step_seconds={step: round(seconds, 3) for step, seconds in steps.items()},
        edge_cut=m.edge_cut,
        edge_cut_fraction=m.edge_cut_fraction,
        balance=m.balance,
    )
    try:
        path.write_text(figures.model_dump_json(by_alias=True))
    except OSError as err:
        log.warning(
            "cannot write the partition figures to %s (%s): %s", path, ENV_TERMINATION_LOG, err
        )


def summary(store: PartitionStore, steps: dict[str, float]) -> str:
    """A human-readable account of a store and the time each step took."""
    m = store.meta
    lines = [
        f"partitioned {m.name}: {m.num_nodes:,} nodes, {m.num_undirected_edges:,} edges, "
        f"{m.num_features} features, {m.num_classes} classes",
        *stages.summary_lines(store.path, m, steps),
        "  part       nodes        out-edges    train      halo nodes",
    ]
    link = m.extra.get("link")
    if link is not None:
        lines.insert(
            -1,
            f"  link       {link['num_train']:,} train, {link['num_valid']:,} valid, "
            f"{link['num_test']:,} test positives; {link['valid_negatives'] or 'all'} "
            "negatives per held-out positive; no held-out edge in the topology",
        )
    for s in m.partitions:
        lines.append(
            f"  {s.id:<10} {s.num_nodes:<12,} {s.num_edges:<12,} {s.num_train:<10,} "
            f"{s.num_halo_nodes:,}"
        )
    return "\n".join(lines)


def main(proc: RoleProcess) -> int:
    """The partition Job's body (``python -m distgnn_workload.partitioner``)."""
    config = proc.config
    try:
        proc.serve_status()
    except OSError as err:
        log.warning("%s; serving no metrics (the figures go to the termination message)", err)
    return run(proc.env, config)
