"""The actions of one reconcile: create and adjust the children the job's phase calls for.

They run after the status that implies them is written (:mod:`.state_machine`), and each is
idempotent: an operator that restarts in between carries them out again from the status.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from distgnn_api.contract import Role
from distgnn_api.spec import TERMINAL_PHASES, DistGNNJobStatus, Phase
from distgnn_operator import naming
from distgnn_operator.builders import (
    STATEFUL_ROLES,
    JobContext,
    build_config_map,
    build_headless_service,
    build_network_policy,
    build_partition_job,
    build_pvc,
    build_statefulset,
)
from distgnn_operator.constants import ANNOTATION_TEMPLATE_HASH, PARTITION_COMPLETE
from distgnn_operator.reconcile.apply import apply, ensure, owner_reference
from distgnn_operator.reconcile.fanout import Fanout, in_turn
from distgnn_operator.reconcile.kube_api import JOB, POD, PVC, ApiError, KubeApi
from distgnn_operator.reconcile.observe import Children
from distgnn_operator.reconcile.spec_memo import SpecMemo
from distgnn_operator.reconcile.status_writes import ReconcileResult
from distgnn_operator.status import PartitionJobView, PodView, clean_pod_policy


def act(
    api: KubeApi,
    job: dict[str, Any],
    ctx: JobContext,
    status: DistGNNJobStatus,
    children: Children,
    result: ReconcileResult,
    memo: SpecMemo,
    fanout: Fanout = in_turn,
    status_write: Callable[[], object] | None = None,
    *,
    restarted: bool = False,
) -> None:
    """Create and adjust the children the phase calls for (rendered once per spec by memo).

    The writes go in stages; the writes of one stage are independent of each other and go
    together through ``fanout``:

    1. the NetworkPolicy, the ConfigMap and the claim: the NetworkPolicy before any pod of
       the job (the partition pod included) can run with its metrics or RPC port open, and
       the ConfigMap and the claim before any pod that mounts them;
    2. the objects that make pods: the partition Job, or the Service and the StatefulSets
       (and the claim's partition marker);
    3. a gang restart's deletions of the pods of earlier generations, once the
       StatefulSets carry the new generation.

    ``status_write``, when given, writes the status that calls for these actions. A finished
    job's goes first (the pods it stops are the evidence it was computed from), and so does
    a gang restart's (``restarted``: its generation must be durable before a pod of it is
    made); then it goes with stage 1. Any other status goes along with every stage: what
    the actions then do follows from the spec and the children alone, and a reconcile
    after a failed status write decides and does the same again.
    """
    writes = _Writes(api, ctx, children, owner_reference(job), result, memo)
    if status.phase in TERMINAL_PHASES:
        if status_write is not None:
            status_write()
        _finish(writes, status, fanout)
        return
    if status_write is None or restarted:
        _stages(writes, status, fanout, status_write)
        return

    def stages() -> None:
        _stages(writes, status, fanout, None)

    fanout([status_write, stages])


def _stages(
    writes: _Writes,
    status: DistGNNJobStatus,
    fanout: Fanout,
    status_write: Callable[[], object] | None,
) -> None:
    """The stages of :func:`act` for a job on its way (``status_write`` goes with stage 1)."""
    api, ctx, children, result = writes.api, writes.ctx, writes.children, writes.result
    owner, memo, spec = writes.owner, writes.memo, writes.ctx.spec
    inputs: list[Callable[[], object]] = [status_write] if status_write is not None else []
    policy = memo.render(build_network_policy, ctx)
    if policy is not None:
        inputs.append(lambda: _ensure(api, policy, children.network_policy, owner, result))
    config_map = memo.render(build_config_map, ctx)
    inputs.append(lambda: _ensure(api, config_map, children.config_map, owner, result))
    pvc = memo.render(build_pvc, ctx)
    if pvc is not None:
        # A retained claim outlives the job, so the job does not own it.
        claim_owner = owner if spec.storage.retention_policy.value == "Delete" else None

        def claim() -> None:
            children.claim = _ensure(api, pvc, children.claim, claim_owner, result)

        inputs.append(claim)
    fanout(inputs)

    makers: list[Callable[[], object]] = [
        lambda: _mark_partition_complete(api, ctx, children, result)
    ]
    match status.phase:
        case Phase.pending | Phase.partitioning:
            if not children.partition_marker(ctx.partition_key):
                desired = memo.render(build_partition_job, ctx)

                def partition_job() -> None:
                    job_obj = _ensure(api, desired, children.partition_job, owner, result)
                    _set_job_suspended(api, job_obj, False, result)

                makers.append(partition_job)
        case Phase.training:
            service = memo.render(build_headless_service, ctx)
            makers.append(lambda: _ensure(api, service, children.service, owner, result))
            makers += _statefulset_calls(
                writes,
                {
                    role: ctx.replicas(role)
                    for role in STATEFUL_ROLES
                    if ctx.replicas(role) > 0 or role in children.statefulsets
                },
            )
        case Phase.suspended | Phase.queued:
            partition = children.partition_job
            if partition is not None:
                makers.append(lambda: _set_job_suspended(api, partition, True, result))
            makers += _statefulset_calls(
                writes,
                dict.fromkeys(children.statefulsets, 0),
            )
    fanout(makers)
    if status.phase is Phase.training:
        _delete_stale_pods(api, ctx, children, result, fanout)


def _finish(writes: _Writes, status: DistGNNJobStatus, fanout: Fanout) -> None:
    """Stop pods of a Succeeded or Failed job as the clean-pod policy says."""
    api, ctx, children, result = writes.api, writes.ctx, writes.children, writes.result
    calls: list[Callable[[], object]] = [
        lambda: _mark_partition_complete(api, ctx, children, result)
    ]
    partition = children.partition_job
    if partition is not None and clean_pod_policy.stops_partition_job(ctx.spec):
        calls.append(lambda: _set_job_suspended(api, partition, True, result))
    calls += _statefulset_calls(
        writes,
        {
            role: clean_pod_policy.replicas_after_finish(ctx.spec, role, status.phase)
            for role in children.statefulsets
        },
    )
    fanout(calls)


@dataclass(frozen=True)
class _Writes:
    """What the writes of one reconcile's actions share."""

    api: KubeApi
    ctx: JobContext
    children: Children
    owner: dict[str, Any]
    result: ReconcileResult
    memo: SpecMemo


def _statefulset_calls(writes: _Writes, replicas: Mapping[Role, int]) -> list[Callable[[], None]]:
    """A stage's calls that apply each role's StatefulSet with its replicas."""
    return [partial(_apply_statefulset, writes, role, count) for role, count in replicas.items()]


def _ensure(
    api: KubeApi,
    desired: dict[str, Any],
    existing: dict[str, Any] | None,
    owner: dict[str, Any] | None,
    result: ReconcileResult,
) -> dict[str, Any]:
    obj, created = ensure(api, desired, existing, owner)
    if created:
        result.actions.append(f"create {desired['kind']} {desired['metadata']['name']}")
    return obj


def _mark_partition_complete(
    api: KubeApi, ctx: JobContext, children: Children, result: ReconcileResult
) -> None:
    """Record a completed partition on the claim, so later jobs on it skip the step."""
    job_obj = children.partition_job
    if job_obj is None or children.claim is None or not PartitionJobView.from_job(job_obj).complete:
        return
    if children.partition_marker(ctx.partition_key):
        return
    key = naming.partition_marker_annotation(ctx.partition_key)
    children.claim = api.patch(
        PVC, ctx.namespace, ctx.claim_name, {"metadata": {"annotations": {key: PARTITION_COMPLETE}}}
    )
    result.actions.append(f"annotate claim {ctx.claim_name} {key}")


def _set_job_suspended(
    api: KubeApi, job_obj: dict[str, Any], suspend: bool, result: ReconcileResult
) -> None:
    """Suspend or resume the partition Job; a finished Job is left alone."""
    conditions = (job_obj.get("status") or {}).get("conditions") or []
    finished = any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )
    if finished or bool((job_obj.get("spec") or {}).get("suspend")) == suspend:
        return
    meta = job_obj["metadata"]
    api.patch(JOB, meta["namespace"], meta["name"], {"spec": {"suspend": suspend}})
    result.actions.append(f"{'suspend' if suspend else 'resume'} Job {meta['name']}")


def _apply_statefulset(writes: _Writes, role: Role, replicas: int) -> None:
    """Server-side apply a StatefulSet when it is absent or its replicas or template differ."""
    api, ctx, children, result = writes.api, writes.ctx, writes.children, writes.result
    rendered = writes.memo.render(build_statefulset, ctx, role)
    desired = {**rendered, "spec": {**rendered["spec"], "replicas": replicas}}
    existing = children.statefulsets.get(role)
    if existing is not None:
        same_replicas = (existing.get("spec") or {}).get("replicas") == replicas
        annotations = (existing.get("metadata") or {}).get("annotations") or {}
        same_template = (
            annotations.get(ANNOTATION_TEMPLATE_HASH)
            == (desired["metadata"]["annotations"][ANNOTATION_TEMPLATE_HASH])
        )
        if same_replicas and same_template:
            return
    children.statefulsets[role] = apply(api, desired, existing, writes.owner)
    verb = "create" if existing is None else "apply"
    result.actions.append(f"{verb} StatefulSet {desired['metadata']['name']} replicas={replicas}")


def _delete_stale_pods(
    api: KubeApi, ctx: JobContext, children: Children, result: ReconcileResult, fanout: Fanout
) -> None:
    """Finish a gang restart: delete every pod created before the current restart generation."""

    def delete(name: str, uid: str | None) -> None:
        try:
            api.delete(POD, ctx.namespace, name, uid=uid)
        except ApiError as err:
            if not err.conflict:  # a uid mismatch: the pod was already replaced
                raise
        result.actions.append(f"delete Pod {name} (restart {ctx.restart_generation})")

    calls: list[Callable[[], None]] = []
    for pod in children.pods:
        view = PodView.from_pod(pod)
        if view is None or view.deleting or view.generation >= ctx.restart_generation:
            continue
        calls.append(partial(delete, view.name, pod["metadata"].get("uid")))
    fanout(calls)
