"""The ``distgnn`` command line as a subprocess argv."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def distgnn_cli() -> list[str]:
    """The installed console script next to this interpreter, else the module."""
    script = Path(sys.executable).parent / "distgnn"
    if script.exists():
        return [str(script)]
    found = shutil.which("distgnn")
    return [found] if found else [sys.executable, "-m", "distgnn_operator.cli"]
