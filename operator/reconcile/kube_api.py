"""The API client the reconciler is given: a small protocol over raw JSON objects, and its
implementation on the kubernetes package's ApiClient. Tests can pass another implementation."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from distgnn_api.spec import API_VERSION, KIND, PLURAL
from distgnn_operator.constants import FIELD_MANAGER


@dataclass(frozen=True)
class Kind:
    """A resource type: how objects name it and where the API serves it."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        """The REST path of a collection, an object or an object's subresource."""
        base = (
            f"/api/{self.api_version}"
            if "/" not in self.api_version
            else f"/apis/{self.api_version}"
        )
        if self.namespaced:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if sub is not None:
                base += f"/{sub}"
        return base


CONFIG_MAP = Kind("v1", "ConfigMap", "configmaps")
PVC = Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims")
POD = Kind("v1", "Pod", "pods")
SERVICE = Kind("v1", "Service", "services")
EVENT = Kind("v1", "Event", "events")
JOB = Kind("batch/v1", "Job", "jobs")
STATEFULSET = Kind("apps/v1", "StatefulSet", "statefulsets")
NETWORK_POLICY = Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies")
DISTGNNJOB = Kind(API_VERSION, KIND, PLURAL)
# Kueue's API (kueue.x-k8s.io), for jobs labelled kueue.x-k8s.io/queue-name.
WORKLOAD = Kind("kueue.x-k8s.io/v1beta2", "Workload", "workloads")
RESOURCE_FLAVOR = Kind("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors", False)
WORKLOAD_PRIORITY_CLASS = Kind(
    "kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass", "workloadpriorityclasses", False
)

KINDS: dict[tuple[str, str], Kind] = {
    (k.api_version, k.kind): k
    for k in (
        CONFIG_MAP,
        PVC,
        POD,
        SERVICE,
        EVENT,
        JOB,
        STATEFULSET,
        NETWORK_POLICY,
        DISTGNNJOB,
        WORKLOAD,
        RESOURCE_FLAVOR,
        WORKLOAD_PRIORITY_CLASS,
    )
}


def kind_of(obj: Mapping[str, Any]) -> Kind:
    """The Kind of a manifest, from its apiVersion and kind."""
    try:
        return KINDS[(str(obj["apiVersion"]), str(obj["kind"]))]
    except KeyError:
        raise ValueError(
            f"no Kind registered for {obj.get('apiVersion')}/{obj.get('kind')}"
        ) from None


class ApiError(Exception):
    """A non-2xx answer of the API server."""

    def __init__(self, status: int, reason: str, body: Mapping[str, Any] | None = None) -> None:
        self.status = status
        self.reason = reason
        self.body = dict(body or {})
        super().__init__(f"{status} {reason}: {self.body.get('message', '')}".strip())

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """A stale resourceVersion or uid precondition (409 Conflict, not AlreadyExists)."""
        return self.status == 409 and self.body.get("reason") != "AlreadyExists"

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.body.get("reason") == "AlreadyExists"

    @property
    def message(self) -> str:
        """The API server's own message."""
        return str(self.body.get("message") or self.reason)

    @property
    def retryable(self) -> bool:
        """False when sending the same object again cannot succeed: the API server found it
        invalid (400, 422) or forbade it (403) for a reason other than an exhausted quota.
        Conflicts (409), throttling (429), server errors (5xx) and the rest are retried."""
        if self.status in (400, 422):
            return False
        if self.status == 403:
            return "exceeded quota" in self.message
        return True


PatchType = Literal["merge", "apply"]

Selector = Mapping[str, str]
"""Labels (or fields, e.g. an Event's reason) that listed objects must have."""
Body = Mapping[str, Any]
"""A JSON object sent to the API server: a manifest or a patch."""
Object = dict[str, Any]
"""An object as the API server answers it."""


class KubeApi(Protocol):
    """What the reconciler needs from the API server."""

    def get(self, kind: Kind, namespace: str, name: str) -> Object | None:
        """The object, or None when it does not exist."""
        ...

    def list(
        self, kind: Kind, namespace: str, labels: Selector, fields: Selector | None = None
    ) -> list[Object]:
        """Objects in a namespace whose labels (and fields, e.g. an Event's reason) match."""
        ...

    def create(self, obj: Body) -> Object:
        """Create an object; ApiError.already_exists when it does."""
        ...

    def patch(
        self, kind: Kind, namespace: str, name: str, body: Body, *, subresource: str | None = None
    ) -> Object:
        """JSON merge patch of an object (or of its subresource)."""
        ...

    def replace_status(self, read: Body, status: Body) -> Object:
        """Replace the status of the object ``read`` if the stored status is still the one
        it read (none: none yet), whatever else changed in the object meanwhile; a status
        that changed is a conflict (409). Where the status cannot be compared exactly, the
        resourceVersion read guards the write instead (any change of the object conflicts).
        Returns the object."""
        ...

    def apply(self, obj: Body, *, force: bool = True) -> Object:
        """Server-side apply of a whole manifest with the operator's field manager; unforced,
        a field another manager owns with another value is a conflict (409)."""
        ...

    def delete(self, kind: Kind, namespace: str, name: str, *, uid: str | None = None) -> bool:
        """Delete in the background (children follow); False when already gone."""
        ...


def comparable(value: Any) -> bool:
    """Whether the API server's JSON Patch ``test`` compares a value, as Python writes it,
    equal to the same value it stored.

    It compares numbers and strings by their bytes as each side encodes them: Python and Go
    write a float alike only in fixed notation (1e-4 <= |x| < 1e16; an integral one reads
    back as an int), and a string alike only in printable ASCII without <, > and & (which
    Go escapes)."""
    if isinstance(value, float):
        return value == 0 or 1e-4 <= abs(value) < 1e16
    if isinstance(value, str):
        return all(" " <= ch <= "~" and ch not in "<>&" for ch in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and comparable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(comparable(v) for v in value)
    return True


RequestObserver = Callable[[str, str], None]
"""Told of every request sent: its verb (get, list, create, patch, apply, delete) and the
resource (plural, with the subresource: ``distgnnjobs/status``)."""


class RestKubeApi:
    """KubeApi over kubernetes.client.ApiClient, reading and writing plain JSON."""

    def __init__(
        self, api_client: Any, timeout: float = 30.0, observe: RequestObserver | None = None
    ) -> None:
        self._client = api_client
        self._timeout = timeout
        self._observe = observe

    def _call(
        self,
        method: str,
        path: str,
        *,
        verb: tuple[str, Kind, str | None],
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        if self._observe is not None:
            name, kind, sub = verb
            self._observe(name, f"{kind.plural}/{sub}" if sub else kind.plural)
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        method, url, headers, body, _ = self._client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self._client.call_api(
            method, url, header_params=headers, body=body, _request_timeout=self._timeout
        )
        data = response.read()
        parsed: dict[str, Any] = json.loads(data) if data else {}
        if not 200 <= response.status < 300:
            raise ApiError(response.status, str(response.reason), parsed)
        return parsed

    def get(self, kind: Kind, namespace: str, name: str) -> Object | None:
        try:
            return self._call("GET", kind.path(namespace, name), verb=("get", kind, None))
        except ApiError as err:
            if err.not_found:
                return None
            raise

    def list(
        self, kind: Kind, namespace: str, labels: Selector, fields: Selector | None = None
    ) -> list[Object]:
        query = [("labelSelector", ",".join(f"{k}={v}" for k, v in sorted(labels.items())))]
        if fields:
            query.append(("fieldSelector", ",".join(f"{k}={v}" for k, v in sorted(fields.items()))))
        result = self._call("GET", kind.path(namespace), verb=("list", kind, None), query=query)
        items: list[dict[str, Any]] = result.get("items") or []
        return items

    def create(self, obj: Body) -> Object:
        kind = kind_of(obj)
        return self._call(
            "POST",
            kind.path(obj["metadata"].get("namespace")),
            verb=("create", kind, None),
            query=[("fieldManager", FIELD_MANAGER)],
            body=dict(obj),
        )

    def patch(
        self, kind: Kind, namespace: str, name: str, body: Body, *, subresource: str | None = None
    ) -> Object:
        return self._call(
            "PATCH",
            kind.path(namespace, name, subresource),
            verb=("patch", kind, subresource),
            query=[("fieldManager", FIELD_MANAGER)],
            body=dict(body),
            content_type="application/merge-patch+json",
        )

    def replace_status(self, read: Body, status: Body) -> Object:
        """A JSON Patch (RFC 6902) of the status subresource: a ``test`` that the stored
        status is the one read, then the new status (its nulls are pruned by the CRD's
        schema); a merge patch with the resourceVersion read where the test could not
        compare the status exactly (its nulls delete what the status no longer holds)."""
        kind, meta, expected = kind_of(read), read["metadata"], read.get("status")
        namespace, name = meta["namespace"], meta["name"]
        if not comparable(expected):
            body = {
                "metadata": {"resourceVersion": meta["resourceVersion"]},
                "status": dict(status),
            }
            return self.patch(kind, namespace, name, body, subresource="status")
        ops = [
            {"op": "test", "path": "/status", "value": expected},
            {"op": "add", "path": "/status", "value": dict(status)},
        ]
        try:
            return self._call(
                "PATCH",
                kind.path(namespace, name, "status"),
                verb=("patch", kind, "status"),
                query=[("fieldManager", FIELD_MANAGER)],
                body=ops,
                content_type="application/json-patch+json",
            )
        except ApiError as err:
            if err.status == 422 and not err.body.get("details"):
                # A failed test (a status that a schema rejects names its fields in details):
                # the stored status is not the expected one, a stale read as a 409 is.
                raise ApiError(409, "Conflict", {**err.body, "reason": "Conflict"}) from err
            raise

    def apply(self, obj: Body, *, force: bool = True) -> Object:
        kind = kind_of(obj)
        meta = obj["metadata"]
        return self._call(
            "PATCH",
            kind.path(meta.get("namespace"), meta["name"]),
            verb=("apply", kind, None),
            query=[("fieldManager", FIELD_MANAGER), ("force", "true" if force else "false")],
            body=dict(obj),
            content_type="application/apply-patch+yaml",
        )

    def delete(self, kind: Kind, namespace: str, name: str, *, uid: str | None = None) -> bool:
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        }
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        try:
            self._call(
                "DELETE", kind.path(namespace, name), verb=("delete", kind, None), body=options
            )
        except ApiError as err:
            if err.not_found:
                return False
            raise
        return True
