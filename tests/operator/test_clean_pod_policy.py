"""Clean-pod policy: replicas of each StatefulSet once the job finished."""

from __future__ import annotations

import pytest

from distgnn_api.contract import Role
from distgnn_api.spec import Phase
from distgnn_operator.status.clean_pod_policy import replicas_after_finish, stops_partition_job
from tests.operator.factories import make_spec


@pytest.mark.parametrize(
    ("policy", "phase", "sampler", "trainer", "stops_partition"),
    [
        ("All", Phase.succeeded, 0, 0, True),
        ("All", Phase.failed, 0, 0, True),
        ("Running", Phase.succeeded, 0, 3, True),
        ("Running", Phase.failed, 0, 0, True),
        ("None", Phase.succeeded, 2, 3, False),
        ("None", Phase.failed, 2, 3, False),
    ],
)
def test_replicas_after_finish(
    policy: str, phase: Phase, sampler: int, trainer: int, stops_partition: bool
) -> None:
    spec = make_spec(
        runPolicy={"cleanPodPolicy": policy}, samplers={"replicas": 2}, trainers={"replicas": 3}
    )
    assert replicas_after_finish(spec, Role.sampler, phase) == sampler
    assert replicas_after_finish(spec, Role.trainer, phase) == trainer
    assert stops_partition_job(spec) is stops_partition
