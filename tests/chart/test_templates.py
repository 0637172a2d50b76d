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


def test_chart_env_vars_are_operator_settings() -> None:
    from distgnn_operator.settings import ENV_PREFIX, OperatorSettings

    body = _define("distgnn.operatorEnv")
    names = re.findall(r"- name: (\S+)", body)
    assert names
    fields = {ENV_PREFIX + name.upper() for name in OperatorSettings.model_fields}
    unknown = sorted(set(names) - fields)
    assert not unknown, f"the chart sets variables that OperatorSettings does not read: {unknown}"


def test_readme_lists_every_operator_setting() -> None:
    from distgnn_operator.settings import ENV_PREFIX, OperatorSettings

    readme = (CHART_DIR / "README.md").read_text()
    missing = [
        ENV_PREFIX + name.upper()
        for name in OperatorSettings.model_fields
        if f"`{ENV_PREFIX}{name.upper()}`" not in readme
    ]
    assert not missing, f"charts/distgnn/README.md does not document {missing}"
