"""Benchmark scripts loaded as modules by the tests that check their tables and records."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str, *, beside: bool = False) -> ModuleType:
    """The script at ``path`` as module ``name``. ``beside``: it imports modules from its own
    folder (on ``sys.path`` while it loads) and is registered in ``sys.modules`` (its
    dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    if not beside:
        spec.loader.exec_module(module)
        return module
    folder = str(path.parent)
    sys.path.insert(0, folder)
    try:
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module


def run_script(script: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -P script args``, its output captured; fails with the end of that output
    unless it exits 0."""
    proc = subprocess.run(
        [sys.executable, "-P", str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc
