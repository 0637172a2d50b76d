"""Whether a job's resources hold its capacity plan: each shortfall names the role, the
resource, the field to change and by how much.

Memory is compared with the container's limit (what the kernel enforces), else its request;
a role with neither is not checked (the plan still prints its needs). GPU memory is compared
with the memory of one card; the volume with ``storage.size`` when the operator creates the
claim.
"""

from __future__ import annotations

from dataclasses import dataclass

from distgnn_api.capacity import (
    GIB,
    OOC_METIS_SOURCE,
    Plan,
    RolePlan,
    build_plan,
    resource_bytes,
)
from distgnn_api.core_types import ResourceRequirements
from distgnn_api.graph_size_sources import from_spec
from distgnn_api.kube import parse_quantity
from distgnn_api.spec import DistGNNJobSpec


@dataclass(frozen=True)
class Shortfall:
    """One resource that cannot hold what the plan says a pod needs."""

    role: str
    resource: str
    """memory, gpu-memory or storage."""
    field: str
    """The spec field (or setting) that sets the available amount."""
    need: int
    have: int
    hint: str = ""
    """Another way out, when there is one (a smaller partition.metisSampleEdges)."""
    fix: str = ""
    """The way out for this role and resource: the fields that raise or lower it."""

    @property
    def short(self) -> int:
        return self.need - self.have

    @property
    def message(self) -> str:
        what = {
            "memory": "host memory per pod",
            "gpu-memory": "GPU memory per card",
            "storage": "space on the shared volume",
        }[self.resource]
        return (
            f"{self.role}: needs {gib(self.need)} of {what}, {self.field} gives "
            f"{gib(self.have)}: short by {gib(self.short)}"
            + (f"; {self.fix}" if self.fix else "")
            + (f" ({self.hint})" if self.hint else "")
        )


def gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def _resources(spec: DistGNNJobSpec, role: str) -> tuple[ResourceRequirements, str]:
    if role == "partition":
        return spec.partition.resources, "spec.partition.resources"
    if role == "sampler":
        return spec.samplers.resources, "spec.samplers.resources"
    return spec.trainers.resources, "spec.trainers.resources"


def _memory_field(res: ResourceRequirements, prefix: str) -> str:
    return f"{prefix}.{'limits' if 'memory' in res.limits else 'requests'}.memory"


def _sample_hint(spec: DistGNNJobSpec, role: RolePlan) -> str:
    """Out of core, METIS on a sample may be what does not fit: say so, and its size."""
    if role.role != "partition":
        return ""
    found = [i for i in role.items if i.source == OOC_METIS_SOURCE]
    if not found:
        return ""
    return (
        f"or lower spec.partition.metisSampleEdges={spec.partition.metis_sample_edges}: "
        f"METIS on the sample and the passes after it need {gib(found[0].bytes)}"
    )


def _holds_partitions(spec: DistGNNJobSpec, role: str) -> bool:
    return role == ("trainer" if spec.worker_mode else "sampler")


def _memory_fix(spec: DistGNNJobSpec, role: str, field: str, need: int) -> str:
    """How to give a role's pods the host memory they need."""
    raise_it = f"raise {field} to at least {gib(need)}"
    if role == "partition":
        if spec.partition.out_of_core.value == "always":
            return raise_it
        return f"{raise_it}, or set spec.partition.outOfCore to always to stream the graph"
    if _holds_partitions(spec, role):
        pods = "spec.trainers.replicas" if spec.worker_mode else "spec.samplers.replicas"
        return (
            f"{raise_it}, add pods ({pods}) so that each holds a smaller share of the graph, "
            "or lower spec.samplers.cacheRatio"
        )
    return f"{raise_it}, or lower spec.trainers.prefetch or spec.training.batchSize"


def _budget_fix(spec: DistGNNJobSpec, role: RolePlan) -> str:
    """The GPU budgets that would move a role's tables to pinned host memory, where unset."""
    out = ""
    if _holds_partitions(spec, role.role) and spec.samplers.feature_memory is None:
        out += "set spec.samplers.featureMemory (feature rows over it stay in pinned host memory), "
    embeddings = any(i.what.startswith("embeddings of ") and i.where == "gpu" for i in role.items)
    if role.role == "trainer" and embeddings and spec.trainers.embedding_memory is None:
        out += (
            "set spec.trainers.embeddingMemory (embedding shards over it go to pinned host "
            "memory), "
        )
    return out


def _gpu_fix(spec: DistGNNJobSpec, plan: Plan, role: RolePlan, gpu_field: str) -> str:
    """How to make a role's share fit one GPU."""
    cards = f"or run on cards with more memory ({gpu_field})"
    if _holds_partitions(spec, role.role) and plan.shapes.replicate:
        topology = (
            "set spec.samplers.replicateTopology to never (each holder keeps only its "
            "partition's topology), "
        )
    else:
        topology = ""
    topology += _budget_fix(spec, role)
    if role.role == "trainer":
        return (
            f"{topology}lower spec.training.batchSize or spec.model.fanout (a mini-batch at "
            f"its static capacity), {cards}"
        )
    return f"{topology}add sampler pods or lower spec.samplers.concurrency, {cards}"


def check_role(
    spec: DistGNNJobSpec, plan: Plan, role: RolePlan, gpu_memory: int, gpu_field: str
) -> list[Shortfall]:
    out = []
    res, prefix = _resources(spec, role.role)
    have = resource_bytes(res, "memory")
    if have is not None and role.host_bytes > have:
        field = _memory_field(res, prefix)
        out.append(
            Shortfall(
                role.role,
                "memory",
                field,
                role.host_bytes,
                have,
                _sample_hint(spec, role),
                _memory_fix(spec, role.role, field, role.host_bytes),
            )
        )
    if role.gpus_per_pod > 0 and role.gpu_bytes > gpu_memory:
        fix = _gpu_fix(spec, plan, role, gpu_field)
        out.append(
            Shortfall(role.role, "gpu-memory", gpu_field, role.gpu_bytes, gpu_memory, fix=fix)
        )
    return out


def check(
    spec: DistGNNJobSpec, plan: Plan, gpu_memory: int, gpu_field: str = "--gpu-memory"
) -> list[Shortfall]:
    """Every shortfall of ``plan`` against ``spec``'s resources, partition Job first."""
    out: list[Shortfall] = []
    for role in plan.roles:
        out.extend(check_role(spec, plan, role, gpu_memory, gpu_field))
    if spec.storage.claim_name is None:
        size = parse_quantity(spec.storage.size)
        if size is not None and plan.volume_bytes > int(size):
            fix = (
                f"raise spec.storage.size to at least {gib(plan.volume_bytes)}, or name a "
                "larger claim of your own in spec.storage.claimName"
            )
            out.append(
                Shortfall(
                    "volume", "storage", "spec.storage.size", plan.volume_bytes, int(size), fix=fix
                )
            )
    return out


def spec_shortfalls(
    spec: DistGNNJobSpec, gpu_memory: int, gpu_field: str = "--gpu-memory"
) -> list[Shortfall] | None:
    """The shortfalls of a job whose spec states its graph's size; None when it does not
    (``ogb``/``pyg`` datasets not named after a public OGB dataset)."""
    graph = from_spec(spec)
    if graph is None:
        return None
    return check(spec, build_plan(spec, graph, gpu_memory=gpu_memory), gpu_memory, gpu_field)
