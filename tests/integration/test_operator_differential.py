"""Differential test: generated invalid DistGNNJobs, checked by pydantic and by the real API
server. Both must refuse every case and name the field it breaks; a case on which they
disagree fails the test, named with its manifest.

The cases come from tests/integration/invalid_cases.py (hypothesis, seeded): the models' own
constraints for every spec field, Kubernetes' rules for the fields that reach a child, and the
cross-field rules. Generated valid values of the same fields are controls that both must
accept. They go to the API server as server-side dry runs (``dryRun=All`` with
strict field validation, what ``kubectl apply --dry-run=server`` sends), one request each on
one connection, so several hundred take seconds. What only the cluster can know (a claim
that does not exist, an image that does not pull) is in test_operator_stuck_children.py.

DISTGNN_DIFF_SEED and DISTGNN_DIFF_PER_FIELD change the seed and the draws per field.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from distgnn_api.spec import GROUP, PLURAL, VERSION, SpecError, parse_job
from tests.integration.invalid_cases import Case, generate
from tests.integration.valid_cases import generate_valid
from tests.operator.harness import install_crd, report
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("DISTGNN_DIFF_SEED", "11"))
PER_FIELD = int(os.environ.get("DISTGNN_DIFF_PER_FIELD", "5"))
MIN_CASES = 300


@dataclass(frozen=True)
class Verdict:
    """What pydantic and the API server said of one case."""

    case: Case
    pydantic_paths: tuple[str, ...]
    """Field paths pydantic named; empty when it accepted the job."""
    server_status: int
    """HTTP status of the dry run: 201 accepted, 4xx refused."""
    server_message: str

    @property
    def pydantic_refused(self) -> bool:
        return bool(self.pydantic_paths)

    @property
    def server_refused(self) -> bool:
        return self.server_status >= 400

    def problems(self) -> list[str]:
        """Why this case fails the test (empty when both refused it, naming the field)."""
        field = self.case.field
        out = []
        if not self.pydantic_refused:
            out.append("pydantic accepted it")
        elif not any(_under(p, field) for p in self.pydantic_paths):
            out.append(f"pydantic named {list(self.pydantic_paths)}, not {field}")
        if not self.server_refused:
            out.append("the API server accepted it")
        elif field not in self.server_message:
            out.append(f"the API server did not name {field}: {self.server_message}")
        return out


def _under(path: str, field: str) -> bool:
    return path == field or path.startswith((f"{field}.", f"{field}["))


def _pydantic(case: Case) -> tuple[str, ...]:
    try:
        parse_job(case.manifest)
    except SpecError as err:
        return tuple(path for path, _ in err.errors) or ("",)
    return ()


def _server(api: CustomObjectsApi, namespace: str, case: Case) -> tuple[int, str]:
    try:
        api.create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            case.manifest,
            dry_run="All",
            field_validation="Strict",
        )
    except ApiException as err:
        try:
            message = str(json.loads(err.body or "{}").get("message", err.body))
        except (TypeError, ValueError):
            message = str(err.body)
        return int(err.status), message
    return 201, ""


@pytest.fixture(scope="module")
def verdicts(
    control_plane: ControlPlane, request: pytest.FixtureRequest
) -> Iterator[list[Verdict]]:
    install_crd(control_plane)
    namespace = control_plane.create_namespace("differential")
    api = CustomObjectsApi(control_plane.api_client())
    cases = generate(SEED, PER_FIELD, lambda n: f"d{n:03d}")
    began = time.monotonic()
    out = [Verdict(c, _pydantic(c), *_server(api, namespace, c)) for c in cases]
    took = time.monotonic() - began
    refused = sum(v.server_refused for v in out)
    report(
        request.config,
        f"differential: seed {SEED}, {len(out)} cases, {refused} refused at admission, "
        f"{len(out) - refused} accepted, checked in {took:.1f}s",
    )
    try:
        yield out
    finally:
        control_plane.delete_namespace(namespace)


def test_enough_distinct_cases_over_every_kind_of_field(verdicts: list[Verdict]) -> None:
    assert len(verdicts) >= MIN_CASES
    fields = {v.case.field for v in verdicts}
    for field in (
        "metadata.name",
        "spec.scheduling.affinity",
        "spec.scheduling.tolerations",
        "spec.trainers.resources",
        "spec.storage.size",
        "spec.scheduling.nodeSelector",
        "spec.metricsPort",
        "spec.dataset.ogb.path",
        "spec.dataset.hetero.targetNodeType",
        "spec.dataset.hetero.edgeTypes",
        "spec.dataset.syntheticMag.scale",
        "spec.model.edgeFanouts",
        "spec.model.embeddingDim",
        "spec.task",
        "spec.linkPrediction",
        "spec.linkPrediction.split.valid",
        "spec.linkPrediction.split.fromDataset",
        "spec.linkPrediction.evaluation.negatives",
        "spec.linkPrediction.evaluation.hitsAt",
        "spec.linkPrediction.edgeType",
        "spec.linkPrediction.reverseEdgeType",
        "spec.dataset.syntheticLink.scale",
    ):
        assert field in fields, field
    assert len({json.dumps(v.case.manifest, sort_keys=True) for v in verdicts}) == len(verdicts)


def test_pydantic_and_the_api_server_refuse_every_case_naming_the_field(
    verdicts: list[Verdict],
) -> None:
    failures = [
        f"{v.case.id}: {'; '.join(v.problems())}\n  {json.dumps(v.case.manifest)}"
        for v in verdicts
        if v.problems()
    ]
    assert not failures, f"{len(failures)} of {len(verdicts)} cases disagree:\n" + "\n".join(
        failures[:40]
    )


def test_valid_controls_are_accepted_by_both(control_plane: ControlPlane) -> None:
    """Generated valid values of the same fields: the rules refuse only what they should."""
    namespace = control_plane.create_namespace("differential-valid")
    api = CustomObjectsApi(control_plane.api_client())
    try:
        controls = generate_valid(SEED, 4)
        failures = []
        for case in controls:
            refused_by = _pydantic(case)
            status, message = _server(api, namespace, case)
            if refused_by or status >= 400:
                failures.append(
                    f"{case.id}: pydantic named {list(refused_by)}; API server {status} {message}"
                    f"\n  {json.dumps(case.manifest)}"
                )
    finally:
        control_plane.delete_namespace(namespace)
    assert len(controls) >= 40
    assert not failures, "\n".join(failures)


def test_the_same_seed_gives_the_same_cases() -> None:
    first = generate(SEED, 2, lambda n: f"d{n:03d}")
    again = generate(SEED, 2, lambda n: f"d{n:03d}")
    assert [c.manifest for c in first] == [c.manifest for c in again]
