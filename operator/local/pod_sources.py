"""What a local container reads from its pod: the downward API, env values ($(VAR) expansion,
ConfigMap keys) and its volumes, mapped to local folders.

The pod templates are the operator builders' own; what only a kubelet provides is given
here from the local run's folders and the rendered ConfigMaps.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distgnn_operator.local.loopback import LocalModeError
from distgnn_operator.local.ports import LOOPBACK

_FIELD_RE = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")
_VAR_REF_RE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes $(VAR) expansion: defined names expand, $$ escapes, others stay as written."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR_REF_RE.sub(sub, value)


@dataclass(frozen=True)
class PodView:
    """What the downward API can read of a local pod."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    spec: Mapping[str, Any]

    def field(self, path: str, where: str) -> str:
        simple: dict[str, Callable[[], str]] = {
            "metadata.name": lambda: self.name,
            "metadata.namespace": lambda: self.namespace,
            "metadata.uid": lambda: f"local-{self.name}",
            "status.podIP": lambda: LOOPBACK,
            "status.hostIP": lambda: LOOPBACK,
            "spec.nodeName": socket.gethostname,
            "spec.serviceAccountName": lambda: str(self.spec.get("serviceAccountName", "default")),
        }
        if path in simple:
            return simple[path]()
        m = _FIELD_RE.match(path)
        if m:
            source = self.labels if m.group(1) == "labels" else self.annotations
            return source.get(m.group(2), "")
        raise LocalModeError(f"{where}: fieldRef {path!r} is not supported in local mode")


class PodSources:
    """The env values and volumes of a local pod's container: the data volume (a claim) is
    ``data_dir``, ConfigMaps and scratch volumes are folders under ``run_dir``."""

    def __init__(
        self, data_dir: Path, run_dir: Path, config_maps: Sequence[Mapping[str, Any]]
    ) -> None:
        self._data_dir = data_dir
        self._run_dir = run_dir
        self._config_maps = {cm["metadata"]["name"]: cm for cm in config_maps}

    def env(self, pod: PodView, container: Mapping[str, Any], where: str) -> dict[str, str]:
        """The container's env as the kubelet sets it: envFrom ConfigMaps, then env in order."""
        env: dict[str, str] = {}
        for src in container.get("envFrom", []):
            prefix = src.get("prefix", "")
            if "configMapRef" in src:
                cm = self.config_map(src["configMapRef"]["name"], where)
                env.update({prefix + k: v for k, v in cm.get("data", {}).items()})
            else:
                raise LocalModeError(f"{where}: envFrom {sorted(src)} is not supported locally")
        for item in container.get("env", []):
            env[item["name"]] = self._env_value(item, env, pod, where)
        return env

    def config_map(self, name: str, where: str) -> Mapping[str, Any]:
        if name not in self._config_maps:
            raise LocalModeError(f"{where}: ConfigMap {name!r} is not among the rendered children")
        return self._config_maps[name]

    def _env_value(
        self, item: Mapping[str, Any], env: Mapping[str, str], pod: PodView, where: str
    ) -> str:
        name = item["name"]
        if "valueFrom" not in item:
            return expand(str(item.get("value", "")), env)
        source = item["valueFrom"]
        if "fieldRef" in source:
            return pod.field(source["fieldRef"]["fieldPath"], f"{where} env {name}")
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            data = self.config_map(ref["name"], where).get("data", {})
            if ref["key"] not in data:
                raise LocalModeError(
                    f"{where} env {name}: ConfigMap {ref['name']} has no key {ref['key']!r}"
                )
            return str(data[ref["key"]])
        raise LocalModeError(
            f"{where} env {name}: valueFrom {sorted(source)} is not supported in local mode"
        )

    def mounts(
        self, pod: PodView, container: Mapping[str, Any], where: str
    ) -> list[tuple[str, Path]]:
        """(mount path, local path) pairs, longest mount path first."""
        volumes = {v["name"]: v for v in pod.spec.get("volumes", [])}
        out: list[tuple[str, Path]] = []
        for mount in container.get("volumeMounts", []):
            vol = volumes.get(mount["name"])
            if vol is None:
                raise LocalModeError(f"{where}: volumeMount {mount['name']!r} names no volume")
            local = self._volume_path(vol, pod, where)
            if mount.get("subPath"):
                local = local / mount["subPath"]
            out.append((mount["mountPath"].rstrip("/") or "/", local))
        out.sort(key=lambda m: len(m[0]), reverse=True)
        return out

    def _volume_path(self, vol: Mapping[str, Any], pod: PodView, where: str) -> Path:
        if "persistentVolumeClaim" in vol:
            self._data_dir.mkdir(parents=True, exist_ok=True)
            return self._data_dir
        if "configMap" in vol:
            cm = self.config_map(vol["configMap"]["name"], where)
            target: Path = self._run_dir / vol["name"]
            _materialize(cm.get("data", {}), vol["configMap"].get("items"), target)
            return target
        if "emptyDir" in vol:
            if (vol["emptyDir"] or {}).get("medium") == "Memory" and Path("/dev/shm").is_dir():
                return Path("/dev/shm")
            scratch: Path = self._run_dir / "volumes" / pod.name / vol["name"]
            scratch.mkdir(parents=True, exist_ok=True)
            return scratch
        if "hostPath" in vol:
            return Path(vol["hostPath"]["path"])
        kinds = sorted(k for k in vol if k != "name")
        raise LocalModeError(
            f"{where}: volume {vol['name']!r} of kind {kinds} is not supported locally"
        )


def map_path(value: str, mounts: Sequence[tuple[str, Path]]) -> str:
    """``value`` with a mount path in it mapped to the local folder (longest mount first)."""
    for mount_path, local in mounts:
        if value == mount_path:
            return str(local)
        if value.startswith(mount_path + "/"):
            return str(local / value[len(mount_path) + 1 :])
    return value


def _materialize(
    data: Mapping[str, str], items: Sequence[Mapping[str, str]] | None, target: Path
) -> None:
    """Write a ConfigMap's keys as files, as the kubelet projects them."""
    target.mkdir(parents=True, exist_ok=True)
    paths = {i["key"]: i["path"] for i in items} if items else {k: k for k in data}
    for key, rel in paths.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data[key])
