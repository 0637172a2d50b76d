"""The base classes of the DistGNNJob API's models: camelCase, immutable, no unknown fields."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from distgnn_api.kube import CoreModel


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
