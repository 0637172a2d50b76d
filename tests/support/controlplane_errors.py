"""The errors of the test control plane: one base class, a component's failure naming its log,
and kubectl's non-zero exit carrying its stderr."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path


class ControlPlaneError(RuntimeError):
    """The control plane cannot be built or used."""


class ComponentError(ControlPlaneError):
    """A component failed to start, did not become ready, or exited; names it and its log."""

    def __init__(
        self,
        component: str,
        log_path: Path,
        problem: str,
        tail: str = "",
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.component = component
        self.log_path = log_path
        self.process = process
        message = f"control-plane component {component!r} {problem}; see its log {log_path}"
        if tail:
            message += f"\n--- last lines of {log_path} ---\n{tail}"
        super().__init__(message)


class KubectlError(subprocess.CalledProcessError):
    """kubectl exited non-zero; the message carries its stderr."""

    def __str__(self) -> str:
        return (
            f"{shlex.join(str(a) for a in self.cmd)} exited with {self.returncode}:\n"
            f"{(self.stderr or '').strip()}\n{(self.output or '').strip()}".rstrip()
        )
