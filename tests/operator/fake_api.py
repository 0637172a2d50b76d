"""An in-memory KubeApi for the reconciler's unit tests: a dict of objects with resource
versions, merge patches, server-side apply (as replace) and AlreadyExists/Conflict errors."""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Mapping
from typing import Any

from distgnn_operator.reconcile.kube_api import ApiError, Body, Kind, Object, Selector, kind_of

Key = tuple[str, str, str]  # plural, namespace, name


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _field(obj: Mapping[str, Any], path: str) -> Any:
    """A field selector's value: 'involvedObject.name' reads obj['involvedObject']['name']."""
    value: Any = obj
    for part in path.split("."):
        value = (value or {}).get(part)
    return value


def _owners(obj: Mapping[str, Any]) -> list[Any]:
    return list((obj.get("metadata") or {}).get("ownerReferences") or [])


class FakeKubeApi:
    """Objects by (plural, namespace, name); every write is recorded in ``writes``, every
    read as (verb, plural) in ``reads``."""

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.writes: list[tuple[str, str, str]] = []
        self.reads: list[tuple[str, str]] = []
        self.refuse: dict[tuple[str, str], ApiError] = {}
        """(kind, name) -> the error a create or apply of that object raises."""
        self._versions = itertools.count(1)

    # -- helpers for tests

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store an object as a controller or a user would (no write recorded)."""
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._versions))
        kind = kind_of(stored)
        self.objects[(kind.plural, meta["namespace"], meta["name"])] = stored
        return copy.deepcopy(stored)

    def find(self, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
        obj = self.objects.get((kind.plural, namespace, name))
        assert obj is not None, f"no {kind.kind} {namespace}/{name}"
        return obj

    def kinds_written(self, verb: str) -> list[str]:
        return [f"{k}/{n}" for v, k, n in self.writes if v == verb]

    # -- KubeApi

    def get(self, kind: Kind, namespace: str, name: str) -> Object | None:
        self.reads.append(("get", kind.plural))
        obj = self.objects.get((kind.plural, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(
        self, kind: Kind, namespace: str, labels: Selector, fields: Selector | None = None
    ) -> list[Object]:
        self.reads.append(("list", kind.plural))
        out = []
        for (plural, ns, _), obj in sorted(self.objects.items()):
            have = obj["metadata"].get("labels") or {}
            if (
                plural == kind.plural
                and ns == namespace
                and all(have.get(k) == v for k, v in labels.items())
                and all(_field(obj, k) == v for k, v in (fields or {}).items())
            ):
                out.append(copy.deepcopy(obj))
        return out

    def create(self, obj: Body) -> Object:
        kind = kind_of(obj)
        meta = obj["metadata"]
        name = meta.get("name") or f"{meta['generateName']}{next(self._versions)}"
        if (kind.kind, name) in self.refuse:
            raise self.refuse[(kind.kind, name)]
        if (kind.plural, meta["namespace"], name) in self.objects:
            raise ApiError(409, "Conflict", {"reason": "AlreadyExists"})
        self.writes.append(("create", kind.kind, name))
        return self.put({**obj, "metadata": {**meta, "name": name}})

    def patch(
        self, kind: Kind, namespace: str, name: str, body: Body, *, subresource: str | None = None
    ) -> Object:
        current = self.objects.get((kind.plural, namespace, name))
        if current is None:
            raise ApiError(404, "Not Found", {"reason": "NotFound"})
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version is not None and version != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", {"reason": "Conflict"})
        patch = copy.deepcopy(dict(body))
        patch.get("metadata", {}).pop("resourceVersion", None)
        if subresource == "status":
            patch = {"status": patch.get("status")}
        else:
            patch.pop("status", None)
        self.writes.append(
            ("patch" if subresource is None else f"patch/{subresource}", kind.kind, name)
        )
        return self.put(merge_patch(current, patch))

    def replace_status(self, read: Body, status: Body) -> Object:
        """As the API server's JSON Patch: a test of the stored status against the one
        read, then the new one (without its nulls, which the CRD's schema prunes)."""
        kind, meta = kind_of(read), read["metadata"]
        name = meta["name"]
        current = self.objects.get((kind.plural, meta["namespace"], name))
        if current is None:
            raise ApiError(404, "Not Found", {"reason": "NotFound"})
        if current.get("status") != read.get("status"):
            raise ApiError(409, "Conflict", {"reason": "Conflict"})
        self.writes.append(("patch/status", kind.kind, name))
        return self.put({**current, "status": merge_patch({}, dict(status))})

    def apply(self, obj: Body, *, force: bool = True) -> Object:
        kind = kind_of(obj)
        meta = obj["metadata"]
        current = self.objects.get((kind.plural, meta["namespace"], meta["name"]))
        if (kind.kind, meta["name"]) in self.refuse:
            raise self.refuse[(kind.kind, meta["name"])]
        if not force and current is not None and _owners(current) != _owners(obj):
            # Unforced: the ownerReferences someone else wrote conflict.
            raise ApiError(409, "Conflict", {"reason": "Conflict"})
        self.writes.append(("apply", kind.kind, meta["name"]))
        desired = copy.deepcopy(dict(obj))
        if current is not None:
            desired["metadata"]["uid"] = current["metadata"]["uid"]
            desired["status"] = current.get("status", {})
        return self.put(desired)

    def delete(self, kind: Kind, namespace: str, name: str, *, uid: str | None = None) -> bool:
        current = self.objects.get((kind.plural, namespace, name))
        if current is None:
            return False
        if uid is not None and current["metadata"]["uid"] != uid:
            raise ApiError(409, "Conflict", {"reason": "Conflict"})
        self.writes.append(("delete", kind.kind, name))
        del self.objects[(kind.plural, namespace, name)]
        return True
