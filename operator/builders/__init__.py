"""Pure builders of a DistGNNJob's children: spec in, manifest dict out.

No kopf and no kubernetes imports here: ``distgnn render`` and local mode use the same
functions without a cluster. The apply layer (``distgnn_operator.reconcile``) adds
ownerReferences.
"""

from distgnn_operator.builders.children import build_children
from distgnn_operator.builders.config_map import build_config_map
from distgnn_operator.builders.context import JobContext, OperatorPeer
from distgnn_operator.builders.env import build_env
from distgnn_operator.builders.headless_service import build_headless_service
from distgnn_operator.builders.network_policy import build_network_policy
from distgnn_operator.builders.partition_job import build_partition_job
from distgnn_operator.builders.placement import Placement, PlacementConflict
from distgnn_operator.builders.pod_template import build_container, build_pod_spec
from distgnn_operator.builders.pvc import build_pvc
from distgnn_operator.builders.statefulset import STATEFUL_ROLES, build_statefulset, template_hash
from distgnn_operator.builders.workload import build_workload

__all__ = [
    "STATEFUL_ROLES",
    "JobContext",
    "OperatorPeer",
    "Placement",
    "PlacementConflict",
    "build_children",
    "build_config_map",
    "build_container",
    "build_env",
    "build_headless_service",
    "build_network_policy",
    "build_partition_job",
    "build_pod_spec",
    "build_pvc",
    "build_statefulset",
    "build_workload",
    "template_hash",
]
