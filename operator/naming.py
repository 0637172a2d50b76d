"""Names of a DistGNNJob's children, labels and annotations, each defined once.

Pod, StatefulSet and Service names come from :mod:`distgnn_api.contract` (the workload
derives peer addresses from them); the names only the operator needs live here.
"""

from __future__ import annotations

import hashlib

from distgnn_api.contract import (
    PARTITIONS_DIR,
    Role,
    pod_name,
    service_name,
    statefulset_name,
)
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator.constants import (
    APP_NAME,
    LABEL_APP_COMPONENT,
    LABEL_APP_INSTANCE,
    LABEL_APP_NAME,
    LABEL_JOB,
    LABEL_MANAGED_BY,
    LABEL_ROLE,
    MANAGER,
    PARTITION_FIGURES_PREFIX,
    PARTITION_MARKER_PREFIX,
)

__all__ = [
    "child_labels",
    "claim_name",
    "config_map_name",
    "network_policy_name",
    "partition_figures_annotation",
    "partition_job_name",
    "partition_marker_annotation",
    "partition_volume_path",
    "pod_name",
    "pvc_name",
    "role_labels",
    "role_selector",
    "service_name",
    "statefulset_name",
    "workload_name",
]


def workload_name(job: str, uid: str) -> str:
    """Kueue Workload of a job: distgnnjob-<job>-<5 hex of a hash of the uid>, the shape of
    Kueue's own names (GetWorkloadNameForOwnerWithGVK); a re-created job gets a new one."""
    digest = hashlib.sha256(f"{job}/{uid}".encode()).hexdigest()[:5]
    return f"distgnnjob-{job}-{digest}"


def config_map_name(job: str) -> str:
    """ConfigMap holding the job config JSON: <job>-config."""
    return f"{job}-config"


def pvc_name(job: str) -> str:
    """PersistentVolumeClaim the operator creates when storage.claimName is unset: <job>-data."""
    return f"{job}-data"


def claim_name(job: str, spec: DistGNNJobSpec) -> str:
    """The claim every pod of the job mounts: the named one, or the created one."""
    return spec.storage.claim_name or pvc_name(job)


def partition_job_name(job: str) -> str:
    """The partition Job: <job>-partition."""
    return f"{job}-partition"


def network_policy_name(job: str) -> str:
    """NetworkPolicy isolating the job's pods: <job>-isolation."""
    return f"{job}-isolation"


def partition_marker_annotation(key: str) -> str:
    """Annotation on a claim recording that the partition set <key> on it is complete."""
    return f"{PARTITION_MARKER_PREFIX}{key}"


def partition_figures_annotation(key: str) -> str:
    """Annotation on a claim holding the PartitionFigures JSON of the partition set <key>."""
    return f"{PARTITION_FIGURES_PREFIX}{key}"


def partition_volume_path(key: str) -> str:
    """Directory of a partition set relative to the volume, as status.partition.path shows it."""
    return f"{PARTITIONS_DIR}/{key}"


def child_labels(job: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Labels of every child of a job; the operator's own keys win over the user's extras."""
    labels = dict(extra or {})
    labels.update(
        {
            LABEL_APP_NAME: APP_NAME,
            LABEL_APP_INSTANCE: job,
            LABEL_MANAGED_BY: MANAGER,
            LABEL_JOB: job,
        }
    )
    return labels


def role_labels(job: str, role: Role, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Labels of a role's children and pods."""
    labels = child_labels(job, extra)
    labels.update({LABEL_APP_COMPONENT: role.value, LABEL_ROLE: role.value})
    return labels


def role_selector(job: str, role: Role) -> dict[str, str]:
    """The (immutable) label selector of a role's StatefulSet."""
    return {LABEL_JOB: job, LABEL_ROLE: role.value}
