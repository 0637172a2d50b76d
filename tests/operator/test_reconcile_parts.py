"""The reconciler's parts: REST paths, /progress reads, transition events, operator settings."""

from __future__ import annotations

from typing import Literal

import pytest

from distgnn_api.spec import Condition, DistGNNJobStatus, Phase, Progress
from distgnn_operator.local.ports import free_ports
from distgnn_operator.reconcile.events import transitions
from distgnn_operator.reconcile.kube_api import DISTGNNJOB, JOB, POD, kind_of
from distgnn_operator.reconcile.progress import fetch_progress, progress_url
from distgnn_operator.settings import OperatorSettings
from tests.operator.harness import progress_server


def test_rest_paths() -> None:
    assert POD.path("ns", "p") == "/api/v1/namespaces/ns/pods/p"
    assert JOB.path("ns") == "/apis/batch/v1/namespaces/ns/jobs"
    assert (
        DISTGNNJOB.path("ns", "j", "status")
        == "/apis/distgnn.io/v1alpha1/namespaces/ns/distgnnjobs/j/status"
    )
    assert kind_of({"apiVersion": "batch/v1", "kind": "Job"}) is JOB
    with pytest.raises(ValueError, match="no Kind registered for v9/Thing"):
        kind_of({"apiVersion": "v9", "kind": "Thing"})


def test_progress_from_a_real_server() -> None:
    (port,) = free_ports(1)
    sent = Progress(epoch=4, epochs=9, seeds_per_second=1500.0, val_accuracy=0.5)
    with progress_server("127.0.0.1", port, sent) as requests:
        assert fetch_progress("127.0.0.1", port, timeout=2) == sent
    assert requests == ["/progress"]
    # Nobody listens now: no error, no progress.
    assert fetch_progress("127.0.0.1", port, timeout=0.5) is None
    assert progress_url("fd00::1", 9400) == "http://[fd00::1]:9400/progress"


def cond(type_: str, status: Literal["True", "False"], reason: str) -> Condition:
    return Condition(
        type=type_,
        status=status,
        reason=reason,
        message=f"{type_} {reason}",
        last_transition_time="t",
    )


def test_transition_events() -> None:
    before = DistGNNJobStatus(
        phase=Phase.training, conditions=[cond("Training", "True", "TrainersRunning")]
    )
    after = DistGNNJobStatus(
        phase=Phase.failed,
        conditions=[
            cond("Training", "False", "DeadlineExceeded"),
            cond("Failed", "True", "DeadlineExceeded"),
        ],
    )
    events = transitions(before, after)
    assert events == [("Warning", "DeadlineExceeded", "Failed DeadlineExceeded")]
    restarted = DistGNNJobStatus(
        phase=Phase.training, restarts=1, conditions=[cond("Training", "True", "GangRestart")]
    )
    assert transitions(before, restarted) == [("Warning", "GangRestart", "Training GangRestart")]
    assert transitions(restarted, restarted) == []


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTGNN_OPERATOR_NAMESPACES", "team-a, team-b")
    monkeypatch.setenv("DISTGNN_OPERATOR_PEERING", "distgnn")
    monkeypatch.setenv("DISTGNN_OPERATOR_POD_LABELS", '{"app": "op"}')
    monkeypatch.setenv("DISTGNN_OPERATOR_PROGRESS_POLL_INTERVAL", "2.5")
    settings = OperatorSettings()
    assert settings.namespaces == ["team-a", "team-b"]
    assert settings.peering == "distgnn"
    assert settings.pod_labels == {"app": "op"}
    assert settings.progress_poll_interval == 2.5
    monkeypatch.setenv("DISTGNN_OPERATOR_NAMESPACES", "")
    assert OperatorSettings().namespaces == []
    monkeypatch.setenv("DISTGNN_OPERATOR_METRICS_PORT", "70000")
    with pytest.raises(ValueError, match="metrics_port"):
        OperatorSettings()


def test_replicas_without_a_priority_draw_distinct_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal priorities would let every peered replica work; unset ones are drawn at random."""
    monkeypatch.delenv("DISTGNN_OPERATOR_PEERING_PRIORITY", raising=False)
    drawn = {OperatorSettings().effective_peering_priority() for _ in range(20)}
    assert len(drawn) > 1
    assert all(p > 0 for p in drawn)
    monkeypatch.setenv("DISTGNN_OPERATOR_PEERING_PRIORITY", "7")
    assert OperatorSettings().effective_peering_priority() == 7
