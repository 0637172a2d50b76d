"""One exit code per process: the entry point and the store watchdog cannot both decide.

Each case runs a real Python process that ends the way ``run_role`` ends one: the entry
point's code through ``exit_code(..., decide=claim_exit)`` and ``os._exit``, with a second
thread that ends the process as the store watchdog does (``claim_exit(wait=False)``, then
``os._exit(0)``, "the job is over").
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from distgnn_api import contract as c

pytestmark = pytest.mark.timeout(60)

PROCESS = """
import os, sys, threading, time
from distgnn_workload.runtime.lifecycle import claim_exit, exit_code

first = sys.argv[1]
main_claimed = threading.Event()
watchdog_exited = threading.Event()

def watchdog() -> None:
    if first == "entry":
        main_claimed.wait()
    if claim_exit(wait=False):
        print("watchdog: the job is over", flush=True)
        os._exit(0)
    print("watchdog: stood down", flush=True)
    watchdog_exited.set()

def decide() -> None:
    claim_exit()
    main_claimed.set()
    watchdog_exited.wait(10)

def main() -> int:
    thread = threading.Thread(target=watchdog, daemon=True)
    thread.start()
    if first == "watchdog":
        time.sleep(0.5)  # the watchdog claims and ends the process meanwhile
    raise RuntimeError("shutdown step 'every member leaving' timed out waiting for sampler-0")

os._exit(exit_code(main, "trainer", decide=decide))
"""


def _run(first: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROCESS), first],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )


def test_an_error_being_reported_keeps_its_code_when_the_watchdog_fires() -> None:
    proc = _run("entry")
    assert proc.returncode == c.EXIT_INTERNAL_ERROR, proc.stdout + proc.stderr
    assert "watchdog: stood down" in proc.stdout
    assert "distgnn trainer: internal error: shutdown step" in proc.stderr


def test_a_watchdog_that_decided_first_ends_the_process_with_its_code() -> None:
    proc = _run("watchdog")
    assert proc.returncode == c.EXIT_OK, proc.stdout + proc.stderr
    assert "watchdog: the job is over" in proc.stdout
    # the entry point waited for the watchdog's exit: no second verdict was printed
    assert "internal error" not in proc.stderr
