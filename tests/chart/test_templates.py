"""The chart's templates agree with the operator's names (checked without helm)."""

from __future__ import annotations

import re

from distgnn_operator.constants import LABEL_JOB, LABEL_MANAGED_BY, LABEL_ROLE, MANAGER
from tests.chart.values_doc import CHART_DIR

TEMPLATES = CHART_DIR / "templates"


def _define(name: str) -> str:
    """The body of a named template in _helpers.tpl, stripped."""
    text = (TEMPLATES / "_helpers.tpl").read_text()
    match = re.search(
        r'\{\{-? define "' + re.escape(name) + r'" -?\}\}(?P<body>.*?)\{\{-? end -?\}\}',
        text,
        re.DOTALL,
    )
    assert match, f"_helpers.tpl defines no {name!r}"
    return match["body"].strip()


def test_pod_monitor_selects_the_operators_job_pod_labels() -> None:
    assert _define("distgnn.jobPodJobLabel") == LABEL_JOB
    assert _define("distgnn.jobPodRoleLabel") == LABEL_ROLE
    assert _define("distgnn.jobPodMatchLabels") == f"{LABEL_MANAGED_BY}: {MANAGER}"


def test_operator_runs_its_module() -> None:
    deployment = (TEMPLATES / "deployment.yaml").read_text()
    assert 'command: ["python", "-m", "distgnn_operator"]' in deployment


def test_rbac_grants_no_secrets_and_no_wildcards() -> None:
    rbac = (TEMPLATES / "rbac.yaml").read_text()
    resources = re.findall(r"resources: \[([^\]]*)\]", rbac)
    verbs = re.findall(r"verbs: \[([^\]]*)\]", rbac)
    assert resources
    assert verbs
    for item in resources + verbs:
        assert "secrets" not in item, item
        assert "*" not in item, item
