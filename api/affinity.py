"""Pod affinity, mirroring core/v1 ``Affinity`` field for field, with the rules pod validation
(``pkg/apis/core/validation``) adds to the OpenAPI schema: operators and their values, weights,
label selectors, topology keys and namespace names. Each cross-field rule exists as CEL for the
CRD and as its Python twin. A PodAffinityTerm takes no matchLabelKeys or mismatchLabelKeys."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import Field

from distgnn_api.base_model import CoreModel
from distgnn_api.cel import CelRule, cel
from distgnn_api.kube import Dns1123Label, Labels, LabelValue, QualifiedName


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
