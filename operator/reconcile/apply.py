"""The thin apply layer: ownerReferences, adoption, create-if-absent and server-side apply.

Every write carries the operator's field manager. A child that exists without a controller is
adopted; one controlled by another owner is left alone and reported.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from distgnn_operator.reconcile.kube_api import ApiError, KubeApi, kind_of


class ChildRejected(Exception):
    """The API server refused a child for a reason that sending it again cannot fix."""

    def __init__(self, kind: str, name: str, error: ApiError) -> None:
        self.kind = kind
        self.name = name
        self.error = error
        super().__init__(f"the API server refused {kind} {name}: {error}")


def _refused(desired: Mapping[str, Any], err: ApiError) -> ChildRejected:
    return ChildRejected(str(desired["kind"]), str(desired["metadata"]["name"]), err)


class ChildConflict(Exception):
    """A child's name is taken by an object another owner controls."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name} is controlled by another owner")


def owner_reference(job: Mapping[str, Any]) -> dict[str, Any]:
    """The controller reference a DistGNNJob puts on its children."""
    meta = job["metadata"]
    return {
        "apiVersion": job["apiVersion"],
        "kind": job["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def with_owner(obj: Mapping[str, Any], owner: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of a manifest with the owner as its controller (unchanged when owner is None)."""
    out = copy.deepcopy(dict(obj))
    if owner is not None:
        out["metadata"]["ownerReferences"] = [dict(owner)]
    return out


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of an object's controller, if it has one."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def adopt(
    api: KubeApi, existing: Mapping[str, Any], owner: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Make the owner the controller of an existing child that has none."""
    current = controller_uid(existing)
    meta = existing["metadata"]
    if owner is None or current == owner["uid"]:
        return dict(existing)
    if current is not None:
        raise ChildConflict(str(existing.get("kind", "object")), str(meta["name"]))
    refs = [*(meta.get("ownerReferences") or []), dict(owner)]
    return api.patch(
        kind_of(existing),
        meta["namespace"],
        meta["name"],
        {"metadata": {"ownerReferences": refs, "resourceVersion": meta["resourceVersion"]}},
    )


def _read_again(api: KubeApi, desired: Mapping[str, Any], what: str) -> dict[str, Any]:
    """The child the API server says exists (AlreadyExists, or an apply's conflict), read
    from the API server; one that vanished meanwhile fails the reconcile, to be retried."""
    meta = desired["metadata"]
    found = api.get(kind_of(desired), meta["namespace"], meta["name"])
    if found is None:
        raise RuntimeError(f"{desired['kind']} {meta['name']} {what} and vanished; retrying")
    return found


def ensure(
    api: KubeApi,
    desired: Mapping[str, Any],
    existing: Mapping[str, Any] | None,
    owner: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], bool]:
    """Create the child if absent (else adopt it); returns the object and whether it was created."""
    if existing is not None:
        return adopt(
            api, {**existing, "apiVersion": desired["apiVersion"], "kind": desired["kind"]}, owner
        ), False
    try:
        return api.create(with_owner(desired, owner)), True
    except ApiError as err:
        if not err.retryable:
            raise _refused(desired, err) from err
        if not err.already_exists:
            raise
    return ensure(api, desired, _read_again(api, desired, "exists"), owner)


def apply(
    api: KubeApi,
    desired: Mapping[str, Any],
    existing: Mapping[str, Any] | None,
    owner: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Server-side apply of the desired manifest (adopting an existing child first).

    Without an existing child the apply is not forced: it creates the child, or, when one
    exists after all that another manager wrote (someone else's object), conflicts; then the
    child is read and adopted or reported, as an existing one is."""
    if existing is not None:
        adopt(
            api, {**existing, "apiVersion": desired["apiVersion"], "kind": desired["kind"]}, owner
        )
    try:
        return api.apply(with_owner(desired, owner), force=existing is not None)
    except ApiError as err:
        if not err.retryable:
            raise _refused(desired, err) from err
        if existing is not None or not err.conflict:
            raise
    return apply(api, desired, _read_again(api, desired, "conflicted"), owner)
