"""The CEL rules that refuse specs which cannot run, rule by rule: every generated case of a
rule (tests/integration/runnable_cases.py) is refused by pydantic and by the real API server
with that rule's own message, not merely with some error that names the field, and its
valid controls pass both. The differential test runs the same cases among all the others."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from distgnn_api.spec import GROUP, PLURAL, VERSION, SpecError, parse_job
from tests.integration.invalid_cases import draw, manifest
from tests.integration.runnable_cases import RULE_MESSAGES, runnable_rules, runnable_valid_rules
from tests.operator.harness import install_crd, report
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("DISTGNN_DIFF_SEED", "11"))
DRAWS = int(os.environ.get("DISTGNN_RUNNABLE_DRAWS", "20"))


def _server(api: CustomObjectsApi, namespace: str, doc: dict[str, object]) -> tuple[int, str]:
    try:
        api.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, doc, dry_run="All", field_validation="Strict"
        )
    except ApiException as err:
        return int(err.status), str(json.loads(err.body or "{}").get("message", err.body))
    return 201, ""


def _pydantic(doc: dict[str, object]) -> str:
    try:
        parse_job(doc)
    except SpecError as err:
        return str(err)
    return ""


@pytest.fixture(scope="module")
def api_namespace(control_plane: ControlPlane) -> Iterator[tuple[CustomObjectsApi, str]]:
    install_crd(control_plane)
    namespace = control_plane.create_namespace("runnable-rules")
    try:
        yield CustomObjectsApi(control_plane.api_client()), namespace
    finally:
        control_plane.delete_namespace(namespace)


@pytest.mark.parametrize("index", range(len(runnable_rules())))
def test_each_case_is_refused_by_its_own_rule(
    api_namespace: tuple[CustomObjectsApi, str], request: pytest.FixtureRequest, index: int
) -> None:
    api, namespace = api_namespace
    rule = runnable_rules()[index]
    message = RULE_MESSAGES[index]
    drawn = draw(rule.changes, DRAWS, SEED + 500 + index)
    cases = {json.dumps(c, sort_keys=True): c for c in drawn}
    failures = []
    for n, changes in enumerate(cases.values()):
        doc = manifest(f"r{index}-{n}", changes)
        refused_by = _pydantic(doc)
        status, said = _server(api, namespace, doc)
        if f"{rule.field}: {message}" not in refused_by:
            failures.append(f"pydantic: {refused_by or 'accepted'}\n  {json.dumps(doc)}")
        if status != 422 or message not in said or rule.field not in said:
            failures.append(f"API server {status}: {said}\n  {json.dumps(doc)}")
    report(request.config, f"runnable rule {rule.field}: {len(cases)} generated cases")
    assert len(cases) >= min(DRAWS, 5)
    assert not failures, "\n".join(failures)


def test_the_valid_controls_pass_both(api_namespace: tuple[CustomObjectsApi, str]) -> None:
    api, namespace = api_namespace
    failures = []
    count = 0
    for index, rule in enumerate(runnable_valid_rules()):
        for n, changes in enumerate(draw(rule.changes, DRAWS, SEED + 900 + index)):
            doc = manifest(f"v{index}-{n}", changes)
            count += 1
            refused_by = _pydantic(doc)
            status, said = _server(api, namespace, doc)
            if refused_by or status != 201:
                failures.append(f"{refused_by}; API server {status} {said}\n  {json.dumps(doc)}")
    assert count >= 3 * min(DRAWS, 5)
    assert not failures, "\n".join(failures)
