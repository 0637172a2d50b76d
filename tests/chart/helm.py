"""A small wrapper of the pinned helm binary for the chart tests: isolated dirs, values as flags."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.chart.values_doc import CHART_DIR


class HelmError(RuntimeError):
    """helm exited non-zero; the message holds its command and output."""


def set_flags(values: Mapping[str, Any]) -> list[str]:
    """``--set-json key=<json>`` flags for a mapping of dotted keys to values."""
    flags: list[str] = []
    for key, value in values.items():
        flags += ["--set-json", f"{key}={json.dumps(value)}"]
    return flags


@dataclass(frozen=True)
class Helm:
    """helm with its cache, config and data dirs under ``home`` (nothing touches ~/.cache)."""

    binary: Path
    home: Path
    kubeconfig: Path | None = None

    def run(self, *args: str, timeout: float = 300.0) -> str:
        env = dict(os.environ)
        for var, sub in (
            ("HELM_CACHE_HOME", "cache"),
            ("HELM_CONFIG_HOME", "config"),
            ("HELM_DATA_HOME", "data"),
        ):
            env[var] = str(self.home / sub)
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        command = [str(self.binary), *args]
        result = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
        if result.returncode != 0:
            raise HelmError(
                f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result.stdout

    def lint(self, values: Mapping[str, Any] | None = None) -> str:
        return self.run("lint", "--strict", str(CHART_DIR), *set_flags(values or {}))

    def template(
        self,
        release: str,
        namespace: str,
        values: Mapping[str, Any] | None = None,
        *,
        kube_version: str | None = None,
        include_crds: bool = False,
        extra: Sequence[str] = (),
    ) -> str:
        args = ["template", release, str(CHART_DIR), "--namespace", namespace]
        if kube_version:
            args += ["--kube-version", kube_version]
        if include_crds:
            args.append("--include-crds")
        return self.run(*args, *set_flags(values or {}), *extra)

    def install(self, release: str, namespace: str, values: Mapping[str, Any] | None = None) -> str:
        return self.run(
            "install", release, str(CHART_DIR), "--namespace", namespace, "--wait",
            "--timeout", "120s", *set_flags(values or {}),
        )  # fmt: skip

    def manifest(self, release: str, namespace: str) -> list[dict[str, Any]]:
        """The objects of an installed release (``helm get manifest``)."""
        return documents(self.run("get", "manifest", release, "--namespace", namespace))

    def uninstall(self, release: str, namespace: str) -> str:
        return self.run("uninstall", release, "--namespace", namespace, "--wait")


def documents(text: str) -> list[dict[str, Any]]:
    """The non-empty YAML documents of a multi-document string."""
    return [d for d in yaml.safe_load_all(text) if d]
