"""The partition figures: read from the succeeded partition pod's termination message, kept on
the claim once the partition is marked complete, and read back from the claim after that."""

from __future__ import annotations

from typing import Any

from distgnn_api.contract import PartitionFigures
from distgnn_operator import naming
from distgnn_operator.builders import JobContext
from distgnn_operator.constants import PARTITION_COMPLETE
from distgnn_operator.reconcile.kube_api import PVC
from distgnn_operator.reconcile.observe import Children
from distgnn_operator.reconcile.partition_figures import observe_figures
from tests.operator.factories import FIGURES, make_spec, raw_job
from tests.operator.fake_api import FakeKubeApi

NS = "ns1"
SELECTOR = {"batch.kubernetes.io/controller-uid": "u-1"}


def _ctx() -> JobContext:
    return JobContext(name="demo", namespace=NS, uid="uid-1", spec=make_spec())


def _claim(ctx: JobContext, marked: bool) -> dict[str, Any]:
    annotations = {naming.partition_marker_annotation(ctx.partition_key): PARTITION_COMPLETE}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": ctx.claim_name,
            "namespace": NS,
            "annotations": annotations if marked else {},
        },
    }


def _pod(name: str, code: int, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": dict(SELECTOR)},
        "status": {
            "containerStatuses": [
                {
                    "name": "partition",
                    "state": {"terminated": {"exitCode": code, "message": message}},
                }
            ]
        },
    }


def _job(complete: bool) -> dict[str, Any]:
    job = raw_job("demo-partition", complete=complete)
    job["spec"]["selector"] = {"matchLabels": dict(SELECTOR)}
    return job


def test_figures_move_from_the_pod_to_the_claim_and_stay() -> None:
    api, ctx = FakeKubeApi(), _ctx()
    claim = api.put(_claim(ctx, marked=True))
    # A failed attempt's message is its log tail (FallbackToLogsOnError): not figures.
    api.put(_pod("demo-partition-a", 1, "Traceback (most recent call last): ..."))
    api.put(_pod("demo-partition-b", 0, FIGURES.model_dump_json(by_alias=True)))
    children = Children(claim=claim, partition_job=_job(complete=True))
    assert observe_figures(api, ctx, children) == FIGURES
    kept = api.find(PVC, NS, ctx.claim_name)["metadata"]["annotations"]
    assert (
        PartitionFigures.model_validate_json(
            kept[naming.partition_figures_annotation(ctx.partition_key)]
        )
        == FIGURES
    )

    # A later job on the claim (the partition reused: no Job, no pod) reads them back.
    api.objects = {k: v for k, v in api.objects.items() if k[0] == "persistentvolumeclaims"}
    later = Children(claim=api.find(PVC, NS, ctx.claim_name), partition_job=None)
    writes = len(api.writes)
    assert observe_figures(api, ctx, later) == FIGURES
    assert len(api.writes) == writes


def test_no_figures_before_the_job_completes_or_without_a_message() -> None:
    api, ctx = FakeKubeApi(), _ctx()
    claim = api.put(_claim(ctx, marked=False))
    api.put(_pod("demo-partition-a", 0, FIGURES.model_dump_json(by_alias=True)))
    assert observe_figures(api, ctx, Children(claim=claim, partition_job=_job(False))) is None
    # Complete but not yet marked: the figures are reported, not yet kept on the claim.
    assert observe_figures(api, ctx, Children(claim=claim, partition_job=_job(True))) == FIGURES
    assert api.writes == []

    empty = FakeKubeApi()
    empty.put(_pod("demo-partition-a", 0, ""))
    claim = empty.put(_claim(ctx, marked=True))
    assert observe_figures(empty, ctx, Children(claim=claim, partition_job=_job(True))) is None
