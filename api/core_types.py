"""Core Kubernetes types a DistGNNJob passes into its pods, with the rules the API server applies.

``ResourceRequirements``, ``Toleration`` and ``Affinity`` mirror ``k8s.io/api/core/v1`` field for
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
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from distgnn_api.cel import CelRule, cel, enforce, rules_extra
from distgnn_api.kube import (
    DNS1123_LABEL_PATTERN,
    MAX_MAP_ENTRIES,
    QUALIFIED_NAME_CEL,
    Dns1123Label,
    Labels,
    LabelValue,
    NonNegativeQuantity,
    QualifiedName,
    is_label_value,
    is_qualified_name,
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


class CoreModel(BaseModel):
    """Base of the core types: camelCase on the wire, immutable, no unknown fields."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )


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
    model_config = ConfigDict(json_schema_extra=rules_extra(_rules))

    @model_validator(mode="after")
    def _validate(self) -> Self:
        enforce(self, self._rules)
        return self


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
    model_config = ConfigDict(json_schema_extra=rules_extra(_rules))

    @model_validator(mode="after")
    def _validate(self) -> Self:
        enforce(self, self._rules)
        return self


# --------------------------------------------------------------------------- affinity


class SelectorOperator(StrEnum):
    in_ = "In"
    not_in = "NotIn"
    exists = "Exists"
    does_not_exist = "DoesNotExist"


class NodeSelectorOperator(StrEnum):
    in_ = "In"
    not_in = "NotIn"
    exists = "Exists"
    does_not_exist = "DoesNotExist"
    gt = "Gt"
    lt = "Lt"


MAX_TERMS = 32
MAX_VALUES = 64
_VALUES_BY_OPERATOR = (
    "(self.operator in ['In', 'NotIn'] ? size(self.values) > 0 : "
    "self.operator in ['Exists', 'DoesNotExist'] ? size(self.values) == 0 : "
    "size(self.values) == 1 && self.values[0].matches('^[+-]?[0-9]+$'))"
)
_VALUES_MESSAGE = (
    "values must be non-empty for In and NotIn, empty for Exists and DoesNotExist, and one "
    "integer for Gt and Lt"
)


def _values_fit(operator: str, values: list[str]) -> bool:
    if operator in ("In", "NotIn"):
        return len(values) > 0
    if operator in ("Exists", "DoesNotExist"):
        return not values
    return len(values) == 1 and re.fullmatch(r"[+-]?[0-9]+", values[0]) is not None


class NodeSelectorRequirement(CoreModel):
    """A node label key, an operator and values (core/v1 NodeSelectorRequirement)."""

    key: QualifiedName
    """The label key the selector applies to."""
    operator: NodeSelectorOperator
    """In, NotIn, Exists, DoesNotExist, Gt or Lt."""
    values: list[Annotated[str, Field(max_length=256)]] = Field(
        default_factory=list, max_length=MAX_VALUES
    )
    """Values: non-empty for In and NotIn, empty for Exists and DoesNotExist, one integer for Gt and Lt."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        cel(
            "!has(self.values) ? self.operator in ['Exists', 'DoesNotExist'] : "
            + _VALUES_BY_OPERATOR,
            _VALUES_MESSAGE,
            ".values",
            lambda s: _values_fit(s.operator.value, s.values),
        ),
    )
    model_config = ConfigDict(json_schema_extra=rules_extra(_rules))

    @model_validator(mode="after")
    def _validate(self) -> Self:
        enforce(self, self._rules)
        return self


class NodeFieldSelectorRequirement(CoreModel):
    """A node field requirement: metadata.name In or NotIn exactly one value."""

    key: str = Field(pattern=r"^metadata\.name$")
    """The only node field Kubernetes selects on: metadata.name."""
    operator: Annotated[str, Field(pattern=r"^(In|NotIn)$")]
    """In or NotIn."""
    values: list[Annotated[str, Field(max_length=253)]] = Field(min_length=1, max_length=1)
    """Exactly one node name."""


class NodeSelectorTerm(CoreModel):
    """Node requirements, ANDed (core/v1 NodeSelectorTerm)."""

    match_expressions: list[NodeSelectorRequirement] = Field(
        default_factory=list, max_length=MAX_TERMS
    )
    """Requirements on node labels."""
    match_fields: list[NodeFieldSelectorRequirement] = Field(
        default_factory=list, max_length=MAX_TERMS
    )
    """Requirements on node fields."""


class NodeSelector(CoreModel):
    """Node selector terms, ORed (core/v1 NodeSelector)."""

    node_selector_terms: list[NodeSelectorTerm] = Field(min_length=1, max_length=MAX_TERMS)
    """At least one term; a node that matches any term is selected."""


class PreferredSchedulingTerm(CoreModel):
    """A weighted node preference (core/v1 PreferredSchedulingTerm)."""

    weight: int = Field(ge=1, le=100)
    """Weight, 1 to 100."""
    preference: NodeSelectorTerm
    """The node selector term."""


class NodeAffinity(CoreModel):
    """Node affinity (core/v1 NodeAffinity)."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    """Nodes the pod must run on."""
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list, max_length=MAX_TERMS
    )
    """Nodes the pod prefers."""


class LabelSelectorRequirement(CoreModel):
    """A label key, an operator and values (meta/v1 LabelSelectorRequirement)."""

    key: QualifiedName
    """The label key the selector applies to."""
    operator: SelectorOperator
    """In, NotIn, Exists or DoesNotExist."""
    values: list[LabelValue] = Field(default_factory=list, max_length=MAX_VALUES)
    """Label values: non-empty for In and NotIn, empty for Exists and DoesNotExist."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        cel(
            "!has(self.values) ? self.operator in ['Exists', 'DoesNotExist'] : "
            + _VALUES_BY_OPERATOR,
            _VALUES_MESSAGE,
            ".values",
            lambda s: _values_fit(s.operator.value, s.values),
        ),
    )
    model_config = ConfigDict(json_schema_extra=rules_extra(_rules))

    @model_validator(mode="after")
    def _validate(self) -> Self:
        enforce(self, self._rules)
        return self


class LabelSelector(CoreModel):
    """A label query (meta/v1 LabelSelector)."""

    match_labels: Labels = Field(default_factory=dict)
    """Labels that must all match."""
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, max_length=MAX_TERMS
    )
    """Requirements that must all hold."""


class PodAffinityTerm(CoreModel):
    """Pods to be near (or away from) on a topology domain (core/v1 PodAffinityTerm)."""

    label_selector: LabelSelector | None = None
    """The pods this term selects."""
    namespace_selector: LabelSelector | None = None
    """Namespaces the selected pods may be in; empty selects all."""
    namespaces: list[Dns1123Label] = Field(default_factory=list, max_length=MAX_VALUES)
    """Namespace names the selected pods may be in; unset means the job's namespace."""
    topology_key: QualifiedName
    """Node label whose value defines the topology domain, e.g. kubernetes.io/hostname."""


class WeightedPodAffinityTerm(CoreModel):
    """A weighted pod affinity term (core/v1 WeightedPodAffinityTerm)."""

    weight: int = Field(ge=1, le=100)
    """Weight, 1 to 100."""
    pod_affinity_term: PodAffinityTerm
    """The term."""


class PodAffinity(CoreModel):
    """Pod affinity or anti-affinity (core/v1 PodAffinity / PodAntiAffinity)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(
        default_factory=list, max_length=MAX_TERMS
    )
    """Terms that must hold."""
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(
        default_factory=list, max_length=MAX_TERMS
    )
    """Terms preferred by weight."""


class Affinity(CoreModel):
    """Scheduling constraints of the job's pods (core/v1 Affinity)."""

    node_affinity: NodeAffinity | None = None
    """Node affinity."""
    pod_affinity: PodAffinity | None = None
    """Pod affinity."""
    pod_anti_affinity: PodAffinity | None = None
    """Pod anti-affinity."""

    def manifest(self) -> dict[str, Any]:
        """The Pod spec's affinity object."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)


__all__ = [
    "DNS1123_LABEL_PATTERN",
    "MAX_MAP_ENTRIES",
    "QUALIFIED_NAME_CEL",
    "Affinity",
    "ResourceRequirements",
    "TaintEffect",
    "Toleration",
    "TolerationOperator",
    "is_label_value",
    "is_qualified_name",
]

CORE_RULES: tuple[tuple[type[CoreModel], tuple[CelRule, ...]], ...] = (
    (ResourceRequirements, ResourceRequirements._rules),
    (Toleration, Toleration._rules),
    (NodeSelectorRequirement, NodeSelectorRequirement._rules),
    (LabelSelectorRequirement, LabelSelectorRequirement._rules),
)
"""Every core type with cross-field rules, for the CRD generator and its tests."""
