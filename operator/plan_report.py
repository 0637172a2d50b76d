"""``distgnn plan``: the capacity plan of a job as tables, or as JSON for tools.

The figures come from :mod:`distgnn_api.capacity` (memory per pod), :mod:`distgnn_api.traffic`
(bytes and seeds/s) and :mod:`distgnn_api.capacity_check` (the shortfalls ``--strict`` fails on).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from distgnn_api.capacity import GIB, Plan, RolePlan, resource_bytes
from distgnn_api.capacity_check import Shortfall, gib
from distgnn_api.spec import DistGNNJobSpec
from distgnn_api.traffic import Throughput, Traffic

MIB = 1 << 20


def _human(n: float) -> str:
    if n >= GIB:
        return f"{n / GIB:.2f} GiB"
    if n >= MIB:
        return f"{n / MIB:.1f} MiB"
    return f"{n / 1024:.1f} KiB"


def _available(spec: DistGNNJobSpec, role: str) -> str:
    res = {
        "partition": spec.partition.resources,
        "sampler": spec.samplers.resources,
        "trainer": spec.trainers.resources,
    }[role]
    have = resource_bytes(res, "memory")
    return "unset (not checked)" if have is None else gib(have)


def role_table(spec: DistGNNJobSpec, plan: Plan, gpu_memory: int) -> Table:
    table = Table(title="Per pod", title_justify="left")
    for name in ("role", "pods", "processes", "host memory", "memory limit", "GPU memory/card"):
        table.add_column(name, justify="left" if name == "role" else "right")
    for r in plan.roles:
        gpu = _human(r.gpu_bytes) + f" of {gib(gpu_memory)}" if r.gpus_per_pod else "-"
        table.add_row(
            r.role,
            str(r.pods),
            str(r.processes_per_pod),
            _human(r.host_bytes),
            _available(spec, r.role),
            gpu,
        )
    return table


def items_table(role: RolePlan) -> Table:
    table = Table(title=f"{role.role}: per process", title_justify="left")
    for name in ("what", "where", "bytes", "from"):
        table.add_column(name, justify="right" if name == "bytes" else "left")
    for i in role.items:
        where = i.where + (" (peak)" if i.transient else "")
        table.add_row(i.what, where, _human(i.bytes), i.source)
    return table


def print_plan(
    out: Console,
    spec: DistGNNJobSpec,
    plan: Plan,
    traffic: Traffic,
    throughput: Throughput | str,
    shortfalls: list[Shortfall],
    gpu_memory: int,
) -> None:
    g = plan.graph
    out.print(
        f"graph: {g.num_nodes:,} nodes, {g.num_edges:,} stored edges, {g.num_features} "
        f"features, {g.num_train_nodes:,} training seeds (from {g.source})"
    )
    for note in plan.notes:
        out.print(f"note: {note}")
    out.print(role_table(spec, plan, gpu_memory))
    for role in plan.roles:
        out.print(items_table(role))
    part = plan.role("partition")
    if part is not None and part.seconds is not None:
        out.print(
            f"partition Job: peak {_human(part.host_bytes)}, about {part.seconds:,.0f} s "
            "(fitted on a 2-core machine; benchmarks/capacity/)"
        )
    out.print(f"shared volume: {_human(plan.volume_bytes)} (partition store and checkpoints)")
    t = Table(title="Bytes between pods", title_justify="left")
    for name in ("kind", "per mini-batch (one trainer)", "per epoch (whole job)"):
        t.add_column(name, justify="left" if name == "kind" else "right")
    epoch = traffic.per_epoch
    for kind, value in traffic.per_batch.items():
        t.add_row(kind, _human(value), _human(epoch[kind]))
    out.print(t)
    out.print(
        f"{traffic.steps_per_epoch} steps per epoch on {traffic.trainer_processes} trainer "
        f"process(es); remote share {traffic.remote_share:.2f} ({traffic.remote_share_source})"
    )
    if isinstance(throughput, Throughput):
        out.print(
            f"seeds/s: about {throughput.per_gpu / 1000:,.0f}k per GPU, "
            f"{throughput.total / 1000:,.0f}k in all ({throughput.basis})"
        )
    else:
        out.print(f"seeds/s: {throughput}")
    for s in shortfalls:
        out.print(f"[bold yellow]does not fit:[/] {s.message}")
    if not shortfalls:
        out.print("fits: every checked request or limit holds the plan")


def plan_json(
    plan: Plan, traffic: Traffic, throughput: Throughput | str, shortfalls: list[Shortfall]
) -> dict[str, Any]:
    return {
        "graph": asdict(plan.graph),
        "notes": plan.notes,
        "replicateTopology": plan.shapes.replicate,
        "featureBytes": plan.shapes.feature_bytes,
        "expectedNodesPerHop": list(plan.shapes.expected_nodes),
        "expectedEdgesPerHop": list(plan.shapes.expected_edges),
        "roles": [
            {
                "role": r.role,
                "pods": r.pods,
                "processesPerPod": r.processes_per_pod,
                "gpusPerPod": r.gpus_per_pod,
                "hostBytesPerPod": r.host_bytes,
                "gpuBytesPerCard": r.gpu_bytes,
                "seconds": r.seconds,
                "items": [asdict(i) for i in r.items],
            }
            for r in plan.roles
        ],
        "volumeBytes": plan.volume_bytes,
        "bytesPerBatch": traffic.per_batch,
        "bytesPerEpoch": traffic.per_epoch,
        "stepsPerEpoch": traffic.steps_per_epoch,
        "seedsPerSecond": asdict(throughput) if isinstance(throughput, Throughput) else None,
        "seedsPerSecondNote": throughput if isinstance(throughput, str) else throughput.basis,
        "shortfalls": [{**asdict(s), "short": s.short, "message": s.message} for s in shortfalls],
        "fits": not shortfalls,
    }
