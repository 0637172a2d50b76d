"""A real OCI registry on loopback: Debian's docker-registry (the CNCF distribution registry),
fetched by ``hack/fetch-registry.sh``, serving plain HTTP from a temporary folder."""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from distgnn_operator.local.ports import free_ports

REPO_ROOT = Path(__file__).resolve().parents[2]
FETCH_SCRIPT = REPO_ROOT / "hack" / "fetch-registry.sh"
READY_TIMEOUT_S = 30.0


class RegistryUnavailable(RuntimeError):
    """The registry binary could not be fetched; the message says why."""


@dataclass(frozen=True)
class Registry:
    """A running registry: ``host`` is ``localhost:<port>``, what an image reference names."""

    host: str
    log: Path


def registry_binary(timeout_s: float = 600.0) -> Path:
    """The registry binary, fetched first (Debian's package, cached) when missing."""
    result = subprocess.run(
        ["bash", str(FETCH_SCRIPT)], capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if result.returncode != 0:
        raise RegistryUnavailable(
            f"{FETCH_SCRIPT.name} exited {result.returncode}: {result.stderr.strip()[-2000:]}"
        )
    return Path(result.stdout.strip().splitlines()[-1])


@contextmanager
def running_registry(binary: Path, work: Path) -> Iterator[Registry]:
    """Serve a registry on a free loopback port, storing its blobs under ``work``."""
    (port,) = free_ports(1)
    work.mkdir(parents=True, exist_ok=True)
    config = work / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: info\n"
        f"storage:\n  filesystem:\n    rootdirectory: {work / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = work / "registry.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(binary), "serve", str(config)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _wait_ready(f"http://127.0.0.1:{port}/v2/", process, log)
        yield Registry(f"localhost:{port}", log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the registry exited {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the registry did not answer {url} in {READY_TIMEOUT_S}s")
        time.sleep(0.2)
