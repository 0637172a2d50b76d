"""Core Kubernetes types a DistGNNJob passes into its pods, with the rules the API server applies.

``ResourceRequirements``, ``Toleration`` and ``Affinity`` (in :mod:`distgnn_api.affinity`) mirror ``k8s.io/api/core/v1`` field for
field (the integration tier compares them with the API server's own OpenAPI). Pod validation
(``pkg/apis/core/validation``) adds cross-field rules the OpenAPI schema does not carry; each is
written here as a CEL rule for the CRD and as its Python twin (:mod:`distgnn_api.cel`).

Stricter than Kubernetes, on purpose: resources take cpu, memory, ephemeral-storage and
extended resources (``<domain>/<name>``), not hugepages; GPUs come from ``gpusPerPod``; a
PodAffinityTerm has no matchLabelKeys or mismatchLabelKeys.
"""

from __future__ import annotations

import re
from decimal import Decimal
from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from distgnn_api.affinity import Affinity, LabelSelectorRequirement, NodeSelectorRequirement
from distgnn_api.base_model import CoreModel
from distgnn_api.cel import CelRule, cel
from distgnn_api.kube import (
    LabelValue,
    NonNegativeQuantity,
    QualifiedName,
    parse_quantity,
)

GPU_RESOURCE = "nvidia.com/gpu"
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
# An extended resource: '<DNS subdomain>/<name>', outside kubernetes.io.
EXTENDED_RESOURCE_PATTERN = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_EXTENDED_RE = re.compile(EXTENDED_RESOURCE_PATTERN)
MAX_RESOURCES = 16
JSON_INT_MAX = 2**53 - 1  # the largest integer a JSON number carries exactly, on both sides


# --------------------------------------------------------------------------- resources


def is_resource_name(name: str) -> bool:
    """cpu, memory, ephemeral-storage, or an extended resource outside kubernetes.io."""
    if name in STANDARD_RESOURCES:
        return True
    return (
        len(name) <= 128
        and bool(_EXTENDED_RE.fullmatch(name))
        and "kubernetes.io/" not in name
        and not name.startswith("requests.")
        and name != GPU_RESOURCE
    )


_NAME_CEL = (
    f"k in {list(STANDARD_RESOURCES)!r} || (size(k) <= 128 && "
    f"k.matches(r'{EXTENDED_RESOURCE_PATTERN}') && !k.contains('kubernetes.io/') && "
    f"!k.startsWith('requests.') && k != '{GPU_RESOURCE}')"
)
_NAME_MESSAGE = (
    "resource names are cpu, memory, ephemeral-storage or an extended resource "
    "'<domain>/<name>' (GPUs are set by gpusPerPod)"
)


def _q(expr: str) -> str:
    return f"quantity(string({expr}))"


def _ok(expr: str) -> str:
    return f"isQuantity(string({expr}))"


def _num(value: int | str) -> Decimal | None:
    return parse_quantity(value)


def _within_limits(res: ResourceRequirements) -> bool:
    for name, request in res.requests.items():
        limit = res.limits.get(name)
        r, lim = _num(request), _num(limit) if limit is not None else None
        if r is not None and lim is not None and r > lim:
            return False
    return True


def _extended_whole_and_equal(res: ResourceRequirements) -> bool:
    for name, value in [*res.requests.items(), *res.limits.items()]:
        parsed = _num(value)
        if "/" in name and parsed is not None and parsed != parsed.to_integral_value():
            return False
    for name, request in res.requests.items():
        if "/" not in name:
            continue
        limit = res.limits.get(name)
        if limit is None or _num(limit) != _num(request):
            return False
    return True


class ResourceRequirements(CoreModel):
    """Compute resources of one container, as in a Pod spec (core/v1 ResourceRequirements)."""

    requests: dict[str, NonNegativeQuantity] = Field(default_factory=dict, max_length=MAX_RESOURCES)
    """Minimum resources, e.g. {cpu: '4', memory: '16Gi'}; each at most its limit."""
    limits: dict[str, NonNegativeQuantity] = Field(default_factory=dict, max_length=MAX_RESOURCES)
    """Maximum resources, e.g. {memory: '32Gi'}. GPUs are set by gpusPerPod, not here."""

    # requests and limits may be absent (no default inside a given object): each rule asks has().
    _rules: ClassVar[tuple[CelRule, ...]] = (
        cel(
            f"!has(self.requests) || self.requests.all(k, {_NAME_CEL})",
            _NAME_MESSAGE,
            ".requests",
            lambda s: all(is_resource_name(k) for k in s.requests),
        ),
        cel(
            f"!has(self.limits) || self.limits.all(k, {_NAME_CEL})",
            _NAME_MESSAGE,
            ".limits",
            lambda s: all(is_resource_name(k) for k in s.limits),
        ),
        cel(
            "!has(self.requests) || !has(self.limits) || self.requests.all(k, "
            f"!(k in self.limits) || !{_ok('self.requests[k]')} || !{_ok('self.limits[k]')} || "
            f"{_q('self.requests[k]')}.compareTo({_q('self.limits[k]')}) <= 0)",
            "every request must be less than or equal to its limit",
            ".requests",
            _within_limits,
        ),
        cel(
            "(!has(self.requests) || self.requests.all(k, !k.contains('/') || "
            f"!{_ok('self.requests[k]')} || ({_q('self.requests[k]')}.isInteger() && "
            f"has(self.limits) && k in self.limits && {_ok('self.limits[k]')} && "
            f"{_q('self.requests[k]')}.compareTo({_q('self.limits[k]')}) == 0))) && "
            "(!has(self.limits) || self.limits.all(k, !k.contains('/') || "
            f"!{_ok('self.limits[k]')} || {_q('self.limits[k]')}.isInteger()))",
            "an extended resource takes a whole number, and its request needs an equal limit",
            ".limits",
            _extended_whole_and_equal,
        ),
    )


# --------------------------------------------------------------------------- toleration


class TolerationOperator(StrEnum):
    exists = "Exists"
    equal = "Equal"


class TaintEffect(StrEnum):
    no_schedule = "NoSchedule"
    prefer_no_schedule = "PreferNoSchedule"
    no_execute = "NoExecute"


class Toleration(CoreModel):
    """A Pod toleration (core/v1 Toleration)."""

    key: QualifiedName | None = None
    """Taint key; empty with Exists matches all taints."""
    operator: TolerationOperator = TolerationOperator.equal
    """Exists or Equal."""
    value: LabelValue | None = None
    """Taint value to match with Equal; empty with Exists."""
    effect: TaintEffect | None = None
    """Taint effect to match; unset matches all."""
    toleration_seconds: int | None = Field(default=None, ge=-JSON_INT_MAX, le=JSON_INT_MAX)
    """How long a NoExecute taint is tolerated; needs effect NoExecute."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        cel(
            "has(self.key) || self.operator == 'Exists'",
            "operator must be Exists when key is empty (that matches every taint)",
            ".operator",
            lambda s: s.key is not None or s.operator is TolerationOperator.exists,
        ),
        cel(
            "self.operator != 'Exists' || !has(self.value) || self.value == ''",
            "value must be empty when operator is Exists",
            ".value",
            lambda s: s.operator is not TolerationOperator.exists or not s.value,
        ),
        cel(
            "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
            "tolerationSeconds needs effect NoExecute",
            ".effect",
            lambda s: s.toleration_seconds is None or s.effect is TaintEffect.no_execute,
        ),
    )


__all__ = ["Affinity", "ResourceRequirements", "TaintEffect", "Toleration", "TolerationOperator"]

CORE_RULES: tuple[tuple[type[CoreModel], tuple[CelRule, ...]], ...] = (
    (ResourceRequirements, ResourceRequirements._rules),
    (Toleration, Toleration._rules),
    (NodeSelectorRequirement, NodeSelectorRequirement._rules),
    (LabelSelectorRequirement, LabelSelectorRequirement._rules),
)
"""Every core type with cross-field rules, for the CRD generator and its tests."""
