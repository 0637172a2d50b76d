"""Reading raw pods and Jobs into the views compute_status uses."""

from __future__ import annotations

from distgnn_api.contract import Role
from distgnn_operator.status import PartitionJobView, PodView
from tests.operator.factories import raw_job, raw_pod


def test_pod_view_reads_labels_states_and_ip() -> None:
    view = PodView.from_pod(
        raw_pod("demo", Role.trainer, 2, generation=4, last_exit_code=1, ip="10.1.2.3")
    )
    assert view is not None
    assert (view.role, view.rank, view.generation, view.ready, view.pod_ip) == (
        Role.trainer,
        2,
        4,
        True,
        "10.1.2.3",
    )
    assert [e.exit_code for e in view.failures()] == [1]
    assert not view.exited_ok()


def test_pod_view_ignores_other_roles_and_unlabelled_pods() -> None:
    partition = raw_pod("demo", Role.trainer, 0)
    partition["metadata"]["labels"]["distgnn.io/role"] = "partition"
    assert PodView.from_pod(partition) is None
    assert PodView.from_pod({"metadata": {"name": "x"}}) is None


def test_terminated_pod_is_not_ready_and_exited_ok() -> None:
    view = PodView.from_pod(raw_pod("demo", Role.trainer, 0, exit_code=0))
    assert view is not None
    assert not view.ready
    assert view.exited_ok()


def test_job_view_conditions() -> None:
    assert PartitionJobView.from_job(raw_job("j", complete=True)).complete
    failed = PartitionJobView.from_job(raw_job("j", failed="PodFailurePolicy"))
    assert (failed.failed, failed.reason) == (True, "PodFailurePolicy")
    assert PartitionJobView.from_job(raw_job("j", suspend=True)).suspended
    running = PartitionJobView.from_job({"metadata": {"name": "j"}})
    assert not (running.complete)
    assert not (running.failed)
    assert not (running.suspended)
