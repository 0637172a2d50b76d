"""The capacity plan: memory, GPU memory and disk per pod of a job, from its spec and graph size.

Pure arithmetic, torch-free (the operator image has no torch): every figure re-derives the
layout the workload allocates, and each line names the code it mirrors. Steady figures are
what a process holds while it trains; ``transient`` figures are peaks on top of them while it
loads (the plan adds the largest one). Bytes per mini-batch and seeds/s live in
:mod:`distgnn_api.traffic`; checking a plan against the spec's resources in
:mod:`distgnn_api.capacity_check`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from distgnn_api.core_types import ResourceRequirements
from distgnn_api.evaluation_memory import evaluation_items
from distgnn_api.gpu_sampler_memory import gpu_sampler_items
from distgnn_api.graph_size import GraphSize
from distgnn_api.kube import parse_quantity
from distgnn_api.partition_cost import PROCESS_BYTES, PartitionCost, partition_cost
from distgnn_api.pod_memory import (
    GIB,
    MAX_PEERS_PER_HOST,
    METIS_EDGE_IMBALANCE,
    METIS_NODE_IMBALANCE,
    REPLICATE_FITS_SHARE,
    SAMPLER_PROCESS_BYTES,
    TRAINER_PROCESS_BYTES,
    Item,
    Shapes,
    Where,
    batch_bytes,
    edge_caps,
    expected_hops,
    feature_table_split,
    holder_items,
    hop_caps,
    num_params,
    process_items,
    topology_bytes,
    trainer_items,
)
from distgnn_api.spec import DistGNNJobSpec, PartitionAlgorithm, ReplicateTopology
from distgnn_api.typed_batches import (
    typed_sampler_items,
    typed_step_note,
    typed_trainer_items,
)
from distgnn_api.typed_memory import embedding_items, typed_holder_items, typed_notes
from distgnn_api.typed_shapes import typed_num_params

__all__ = [
    "GIB",
    "SAMPLER_PROCESS_BYTES",
    "TRAINER_PROCESS_BYTES",
    "Item",
    "Plan",
    "RolePlan",
    "Shapes",
    "build_plan",
]


@dataclass(frozen=True)
class RolePlan:
    """What one pod of a role needs."""

    role: str
    pods: int
    processes_per_pod: int
    gpus_per_pod: int
    items: tuple[Item, ...]
    seconds: float | None = None
    """Wall time (the partition Job only)."""

    def _sum(self, where: Where) -> int:
        steady = sum(i.bytes for i in self.items if i.where == where and not i.transient)
        peak = max((i.bytes for i in self.items if i.where == where and i.transient), default=0)
        return steady + peak

    @property
    def host_bytes(self) -> int:
        """Peak host memory of one pod (every process of it)."""
        return self._sum("host") * self.processes_per_pod

    @property
    def gpu_bytes(self) -> int:
        """Peak memory of one GPU (one process per GPU)."""
        return self._sum("gpu")

    @property
    def disk_bytes(self) -> int:
        return self._sum("disk")


@dataclass
class Plan:
    """The capacity plan of one job."""

    graph: GraphSize
    shapes: Shapes
    roles: list[RolePlan]
    volume_bytes: int
    """The partition store and checkpoints on the shared volume."""
    notes: list[str] = field(default_factory=list)

    def role(self, name: str) -> RolePlan | None:
        return next((r for r in self.roles if r.role == name), None)


def shapes(
    spec: DistGNNJobSpec, graph: GraphSize, gpu_memory: int, host_free: int | None
) -> Shapes:
    """One holder's share, the batch capacities and whether the topology is replicated.

    ``host_free`` stands for a CPU holder's free memory (its memory limit), ``gpu_memory`` for
    a GPU holder's, in replicateTopology auto's test.
    """
    h = spec.num_holders
    metis = spec.partition.algorithm == PartitionAlgorithm.metis
    node_imb = METIS_NODE_IMBALANCE if metis else 1.0
    edge_imb = METIS_EDGE_IMBALANCE if metis else 1.0
    owned = min(graph.num_nodes, math.ceil(graph.num_nodes / h * node_imb))
    owned_edges = min(graph.num_edges, math.ceil(graph.num_edges / h * edge_imb))
    policy = spec.samplers.replicate_topology
    topo = topology_bytes(graph)
    holder_gpus = spec.trainers.gpus_per_pod if spec.worker_mode else spec.samplers.gpus_per_pod
    free = gpu_memory if holder_gpus > 0 else host_free
    if policy is not ReplicateTopology.auto:
        replicate = policy is ReplicateTopology.always
        why = f"replicateTopology {policy.value}"
    elif free is None:
        replicate, why = True, "auto: no memory limit on the holders, assumed to fit"
    else:
        replicate = topo <= REPLICATE_FITS_SHARE * free
        why = (
            f"auto: topology {topo / GIB:.2f} GiB {'<=' if replicate else '>'} half of "
            f"{free / GIB:.1f} GiB on the {'GPU' if holder_gpus else 'host'}"
        )
    fanouts = list(spec.model.fanout)
    nodes, edges = expected_hops(graph, spec.training.batch_size, fanouts)
    node_caps = hop_caps(spec.training.batch_size, fanouts, graph.num_nodes)
    if graph.probe is not None and graph.probe.matches(spec) and len(nodes) > 1:
        # The store's sampled batches: scale the sampled hops to their distinct count.
        factor = max(0.0, graph.probe.distinct_nodes - nodes[0]) / max(1.0, sum(nodes[1:]))
        nodes = (nodes[0], *(x * factor for x in nodes[1:]))
    return Shapes(
        holders=h,
        owned_nodes=owned,
        owned_edges=owned_edges,
        hop_caps=node_caps,
        edge_caps=edge_caps(node_caps, fanouts, graph.num_edges),
        feature_bytes=2 if spec.training.bf16 else 4,
        replicate=replicate,
        replicate_why=why,
        params=typed_num_params(spec, graph) if _typed(spec, graph) else num_params(spec, graph),
        expected_nodes=nodes,
        expected_edges=edges,
        gpu_memory=gpu_memory,
    )


def _typed(spec: DistGNNJobSpec, graph: GraphSize) -> bool:
    """Whether the trainer and the samplers are planned per node type and relation: a typed
    graph whose relations are known, in a node-classification job."""
    return bool(graph.node_types and graph.relations) and not spec.is_link_prediction


def _holder_items(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> list[Item]:
    """A holder's items: per node type for a typed graph whose types are known."""
    if graph.node_types:
        return typed_holder_items(spec, graph, s, dev)
    return holder_items(spec, graph, s, dev)


def _sampler_items(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> list[Item]:
    """A holder's GPU samplers: the typed sampler's per node type and relation."""
    if _typed(spec, graph):
        return typed_sampler_items(spec, graph, s, dev)
    return gpu_sampler_items(spec, graph, s, dev)


def _trainer_items(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> list[Item]:
    """A trainer's model, step and batches: per node type and relation for a typed graph."""
    if _typed(spec, graph):
        return typed_trainer_items(spec, graph, s, dev)
    return trainer_items(spec, graph, s, dev)


def _holder_device(spec: DistGNNJobSpec) -> Where:
    gpus = spec.trainers.gpus_per_pod if spec.worker_mode else spec.samplers.gpus_per_pod
    return "gpu" if gpus > 0 else "host"


def resource_bytes(res: ResourceRequirements, name: str) -> int | None:
    """A container's limit of ``name`` (else its request) in bytes; None when neither is set."""
    for values in (res.limits, res.requests):
        if name in values:
            q = parse_quantity(values[name])
            if q is not None:
                return int(q)
    return None


def _memory_limit(spec: DistGNNJobSpec) -> int | None:
    """The holder pods' memory limit (else request), for replicateTopology auto on CPU."""
    res = spec.trainers.resources if spec.worker_mode else spec.samplers.resources
    return resource_bytes(res, "memory")


OOC_METIS_SOURCE = "partition/ooc_metis.py"
"""Source of the out-of-core METIS item (partition.metisSampleEdges) in a partition plan."""


def _partition_items(cost: PartitionCost) -> tuple[Item, ...]:
    """The partition Job's memory and disk, on the path it takes."""
    process = Item("process runtime", PROCESS_BYTES, "host", "partition_cost.PROCESS_BYTES")
    probe = Item("sampling probe: the store's topology pages it reads (mmap)",
                 cost.probe_bytes, "host", "partition/probe.py store.topology()",
                 transient=True)  # fmt: skip
    store = Item("partition store", cost.store_bytes, "disk", "partition/writer.py arrays")
    if cost.out_of_core:
        metis = (
            (Item(f"METIS on a {cost.metis_edges:,}-edge sample, then streamed passes",
                  cost.metis_bytes, "host", OOC_METIS_SOURCE, transient=True),)
            if cost.metis_bytes
            else ()
        )  # fmt: skip
        return (
            process,
            Item("node arrays (ids, degrees, labels, masks)", cost.graph_bytes, "host",
                 "partition/ooc_writer.py"),
            *metis,
            Item("one bucket of edges, sorted", cost.writer_bytes, "host",
                 "partition/external_sort.py BUCKET_EDGES", transient=True),
            Item("spilled edge buckets", cost.spill_bytes, "disk",
                 "partition/external_sort.py", transient=True),
            store,
        )  # fmt: skip
    return (
        process,
        Item("graph (GraphData)", cost.graph_bytes, "host", "data/graph.py nbytes"),
        Item(f"METIS on {cost.metis_edges:,} edges", cost.metis_bytes, "host",
             "partition_cost: measured bytes per edge", transient=True),
        Item("writer id maps", cost.writer_bytes, "host", "partition/writer.py _write_store",
             transient=True),
        probe,
        store,
    )  # fmt: skip


def build_plan(
    spec: DistGNNJobSpec,
    graph: GraphSize,
    *,
    gpu_memory: int = 80 * GIB,
    host_memory: int | None = None,
) -> Plan:
    """The plan of ``spec`` on ``graph``: every role's pods, the partition Job, the volume.

    ``gpu_memory`` is the memory of one GPU; ``host_memory`` what a CPU holder may use (its
    memory limit by default; without one, replicateTopology auto is assumed to replicate).
    """
    s = shapes(spec, graph, gpu_memory, host_memory or _memory_limit(spec))
    cost = partition_cost(spec, graph)
    partition = RolePlan(
        role="partition",
        pods=1,
        processes_per_pod=1,
        gpus_per_pod=0,
        items=_partition_items(cost),
        seconds=cost.seconds,
    )  # fmt: skip
    roles = [partition]
    tdev: Where = "gpu" if spec.trainers.gpus_per_pod > 0 else "host"
    trainer_procs = spec.trainers.replicas * max(1, spec.trainers.gpus_per_pod)
    if not spec.worker_mode:
        sdev = _holder_device(spec)
        items = process_items(sdev, "sampler") + _holder_items(spec, graph, s, sdev)
        items += _sampler_items(spec, graph, s, sdev)
        if all(k >= 1 for k in spec.model.fanout):
            peers = min(trainer_procs, MAX_PEERS_PER_HOST + 1)
            count = spec.samplers.concurrency + 1
            items.append(Item(f"batch slots for {peers} trainer(s) on the host ({count} each)",
                              peers * count * batch_bytes(s, graph, sdev), sdev,
                              "sampler/server.py, runtime/batches.py batch_slot_spec"))  # fmt: skip
        roles.append(
            RolePlan("sampler", spec.samplers.replicas, 1, spec.samplers.gpus_per_pod, tuple(items))
        )
    titems = process_items(tdev, "trainer") + _trainer_items(spec, graph, s, tdev)
    titems += evaluation_items(spec, graph, s, tdev, trainer_procs)
    if (
        not spec.worker_mode
        and _holder_device(spec) == "host"
        and all(k >= 1 for k in spec.model.fanout)
    ):
        # The samplers on this host write each batch into a shared slot this trainer maps
        # and reads: resident here too (charged to the sampler's cgroup, which wrote it).
        samplers = min(spec.samplers.replicas, MAX_PEERS_PER_HOST + 1)
        count = spec.samplers.concurrency + 1
        titems.append(Item(f"batch slots of {samplers} sampler(s) on the host, mapped "
                           f"({count} each)", samplers * count * batch_bytes(s, graph, "host"),
                           "host", "runtime/shared_slots.py SlotReader.attach"))  # fmt: skip
    loaded = 0
    if spec.worker_mode:
        held = _holder_items(spec, graph, s, tdev)
        titems += held + _sampler_items(spec, graph, s, tdev)
        loaded = sum(i.bytes for i in held if i.where == "gpu" and not i.transient)
    # the embeddings are placed once the holder has loaded (auto takes what it left)
    titems += embedding_items(spec, graph, s, tdev, loaded)
    roles.append(
        RolePlan(
            "trainer",
            spec.trainers.replicas,
            max(1, spec.trainers.gpus_per_pod),
            spec.trainers.gpus_per_pod,
            tuple(titems),
        )
    )
    checkpoints = 2 * 12 * s.params  # params + two Adam moments, fp32; the last and the new one
    notes = [f"topology {'replicated' if s.replicate else 'partitioned'} ({s.replicate_why})"]
    split = feature_table_split(spec, graph, s, _holder_device(spec))
    if graph.node_types:
        notes += typed_notes(spec, graph, s, _holder_device(spec), tdev, loaded)
    elif split is not None:
        gpu, host, table = split
        notes.append(
            f"feature table per holder {table / GIB:.2f} GiB: {gpu / GIB:.2f} GiB "
            f"({100.0 * gpu / max(table, 1):.0f}%) on the GPU"
            + (", all of it in pinned host memory, read in place" if host else "")
            + f" (featureMemory {spec.samplers.feature_memory})"
        )
    if _typed(spec, graph):
        notes.append(typed_step_note(spec, graph, s, tdev))
    notes.append(
        f"partition {'out of core' if cost.out_of_core else 'in memory'} ({cost.out_of_core_why})"
    )
    if graph.approximate:
        notes.append(f"approximate: {graph.approximate}")
    if graph.node_types and spec.is_link_prediction:
        notes.append(
            "approximate: a link-prediction trainer of a typed graph: its parameters, "
            "activations, mini-batches and samplers are sized as the homogeneous view's"
        )
    return Plan(
        graph=graph,
        shapes=s,
        roles=roles,
        volume_bytes=cost.store_bytes + max(cost.spill_bytes, checkpoints),
        notes=notes,
    )
