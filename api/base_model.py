"""The base classes of the DistGNNJob API's models: camelCase, immutable, no unknown fields,
and each model's cross-field rules both checked and published in the CRD."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from distgnn_api.cel import CelRule, enforce, rules_extra


def _publish_rules(schema: dict[str, Any], cls: type[Any]) -> None:
    """Add a model's rules to its schema node as ``x-kubernetes-validations``."""
    rules: tuple[CelRule, ...] = cls._rules
    if rules:
        schema.update(rules_extra(rules))


class CoreModel(BaseModel):
    """Base of the core types: camelCase on the wire, immutable, no unknown fields.

    A model with cross-field rules lists them in ``_rules`` and nothing else: they are checked
    when the model is validated and land in its schema node (the CRD's CEL rules).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
        use_attribute_docstrings=True,
        json_schema_extra=_publish_rules,
    )

    _rules: ClassVar[tuple[CelRule, ...]] = ()

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        enforce(self, self._rules)
        return self


class Model(CoreModel):
    """Base of every API model: camelCase on the wire, immutable, no unknown fields."""


class OmitsUnset(Model):
    """A model whose fields in ``_omitted_when_unset`` are not written while they are None.

    The fields added for heterogeneous graphs are listed there, so that a homogeneous job's
    config (``job.json``) is byte for byte what it was before they existed.
    """

    _omitted_when_unset: ClassVar[tuple[str, ...]] = ()
    _omitted_when_default: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            fields = type(self).model_fields
            for name in (*self._omitted_when_unset, *self._omitted_when_default):
                value = getattr(self, name)
                if value is None or (
                    name in self._omitted_when_default and value == fields[name].default
                ):
                    alias = fields[name].alias
                    data.pop(alias if info.by_alias and alias else name, None)
        return data
