"""Success policy: every trainer rank exited 0, in its state or its last state."""

from __future__ import annotations

from distgnn_api.contract import Role
from distgnn_operator.status import Observed, PodView
from distgnn_operator.status.success_policy import trainers_succeeded
from tests.operator.factories import make_spec, pods, raw_pod


def view(rank: int, **kwargs: object) -> PodView:
    v = PodView.from_pod(raw_pod("demo", Role.trainer, rank, **kwargs))  # type: ignore[arg-type]
    assert v is not None
    return v


def test_all_trainers_exit_zero() -> None:
    spec = make_spec(trainers={"replicas": 3})
    assert trainers_succeeded(spec, Observed(pods=tuple(view(r, exit_code=0) for r in range(3))), 0)


def test_last_state_exit_zero_counts() -> None:
    spec = make_spec(trainers={"replicas": 2})
    observed = Observed(pods=(view(0, exit_code=0), view(1, last_exit_code=0)))
    # A pod whose lastState exited 0 and is running again (restarted by the kubelet).
    assert observed.pods[1].last_terminated[0].exit_code == 0
    assert trainers_succeeded(spec, observed, 0)


def test_one_rank_missing_or_running_is_not_success() -> None:
    spec = make_spec(trainers={"replicas": 3})
    assert not trainers_succeeded(
        spec, Observed(pods=(view(0, exit_code=0), view(1, exit_code=0))), 0
    )
    running = (view(0, exit_code=0), view(1, exit_code=0), view(2))
    assert not trainers_succeeded(spec, Observed(pods=running), 0)


def test_samplers_do_not_count_and_old_generations_do_not_count() -> None:
    spec = make_spec(trainers={"replicas": 1})
    samplers_only = Observed(
        pods=tuple(p for p in pods("demo", spec, exit_code=0) if p.role is Role.sampler)
    )
    assert not trainers_succeeded(spec, samplers_only, 0)
    old = Observed(pods=(view(0, exit_code=0, generation=0),))
    assert not trainers_succeeded(spec, old, 1)


def test_non_zero_exit_is_not_success() -> None:
    spec = make_spec(trainers={"replicas": 1})
    assert not trainers_succeeded(spec, Observed(pods=(view(0, exit_code=1),)), 0)
