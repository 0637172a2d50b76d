"""Checks of Triton kernels that run on CPU tensors in Triton's interpreter: each is a
script (``tests/support/*_check.py``) run in a process of its own with
``TRITON_INTERPRET=1`` set before Triton is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_interpreted(script: str, expect: str) -> None:
    """Run ``tests/support/<script>`` under the interpreter; assert that it exited 0 and
    printed ``expect``."""
    # the script imports this package's helpers: the repository at the end of its path
    # (at the front, the repository's operator/ would hide the standard library's)
    run = (
        f"import runpy, sys; sys.path.append({str(ROOT)!r}); "
        f"runpy.run_path({str(ROOT / 'tests' / 'support' / script)!r}, run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", run],
        env={**os.environ, "TRITON_INTERPRET": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert expect in done.stdout, done.stdout


def check_main(check: Callable[[], str | None], passed: str) -> None:
    """A check script's entry point: print the first difference ``check`` found and exit 1,
    or print ``passed`` and exit 0."""
    problem = check()
    print(problem if problem is not None else passed)
    sys.exit(0 if problem is None else 1)
