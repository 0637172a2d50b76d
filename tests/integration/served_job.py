"""The start most operator tests share: a volume for the claim the operator will create, the
operator in process, and the job applied; and the ServiceAccount that the chart gives the
operator when Kueue is enabled."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from distgnn_operator import rbac
from tests.operator.accounts import bound_account
from tests.operator.harness import Cluster, job_manifest, run_operator
from tests.support.controlplane import ControlPlane


@contextmanager
def served_job(
    control_plane: ControlPlane, namespace: str, manifest: dict[str, Any]
) -> Iterator[Cluster]:
    """``manifest`` applied while an in-process operator serves ``namespace``."""
    cluster = Cluster(control_plane, namespace)
    cluster.volume_for_created_claim(manifest["metadata"]["name"])
    with run_operator(control_plane, namespace):
        cluster.apply(manifest)
        yield cluster


@contextmanager
def training_job(
    control_plane: ControlPlane, namespace: str, name: str, **spec: Any
) -> Iterator[tuple[Cluster, list[dict[str, Any]]]]:
    """``job_manifest(name, **spec)`` served until it trains, with its two trainers Ready."""
    with served_job(control_plane, namespace, job_manifest(name, **spec)) as cluster:
        cluster.wait_phase(name, "Training")
        yield cluster, cluster.running_pods(name, "trainer", 2)


@contextmanager
def kueue_operator_account(control_plane: ControlPlane, namespace: str) -> Iterator[str]:
    """A ServiceAccount bound to exactly the chart's rules with kueue.enabled
    (distgnn_operator.rbac): a Role here and a ClusterRole."""
    with bound_account(
        control_plane,
        namespace,
        rbac.NAMESPACED_RULES + rbac.KUEUE_NAMESPACED_RULES,
        rbac.CLUSTER_RULES + rbac.KUEUE_CLUSTER_RULES,
    ) as account:
        yield account
