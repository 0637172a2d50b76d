"""What the calibration reads from a running job's processes: the process tree under
``distgnn run``, each workload process's role and rank (its contract environment), its
memory (``/proc``), its counters (``/metrics``) and its GPU memory (``nvidia-smi``)."""

from __future__ import annotations

import re
import subprocess
import urllib.request
from pathlib import Path

METRICS = (
    "distgnn_trainer_remote_feature_bytes_total",
    "distgnn_trainer_sampled_nodes_total",
    "distgnn_trainer_seeds_total",
    "distgnn_trainer_feature_cache_hits_total",
    "distgnn_trainer_feature_cache_lookups_total",
    "distgnn_sampler_bytes_sent_total",
    "distgnn_sampler_requests_total",
)
_LINE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            out.append(child)
            todo.append(child)
    return out


def contract_of(pid: int) -> tuple[str, str, str] | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    env = dict(x.decode(errors="replace").split("=", 1) for x in raw if b"=" in x)
    if "DISTGNN_ROLE" not in env:
        return None
    return env["DISTGNN_ROLE"], env.get("DISTGNN_RANK", "0"), env.get("DISTGNN_METRICS_PORT", "")


RSS_KINDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")
"""The resident set over time: all of it, then its anonymous (heap), file-backed (mapped
store pages) and shared-memory (slots mapped from other processes) parts."""


def vm_status(pid: int) -> dict[str, int]:
    """VmHWM and the RSS_KINDS of a process, in bytes (empty once it is gone)."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmHWM:", *(f"{k}:" for k in RSS_KINDS))):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


def scrape(port: str) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=0.5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and m["name"] in METRICS:
            key = m["name"] + (f"{{{m['labels']}}}" if "kind" in (m["labels"] or "") else "")
            out[key] = out.get(key, 0.0) + float(m["value"])
    return out


def _smi_mib(query: str) -> list[tuple[int, int]]:
    """``nvidia-smi --query-<query>`` as (integer key, MiB) rows, the rows whose two fields
    are integers; empty without nvidia-smi."""
    try:
        done = subprocess.run(
            ["nvidia-smi", f"--query-{query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = []
    for line in done.stdout.splitlines():
        key, _, mib = line.partition(",")
        if key.strip().isdigit() and mib.strip().isdigit():
            rows.append((int(key), int(mib)))
    return rows


def gpu_used_by_pid() -> dict[int, int]:
    """GPU memory each process holds (``nvidia-smi``: its context and the caching
    allocator's reserve), in bytes; empty without nvidia-smi."""
    out: dict[int, int] = {}
    for pid, mib in _smi_mib("compute-apps=pid,used_memory"):
        out[pid] = out.get(pid, 0) + mib * 2**20
    return out


def gpu_used_by_card() -> dict[str, int]:
    """Memory in use on each GPU (``nvidia-smi``), in bytes, as ``card-<index>``: the
    fallback when a container's process ids are not those nvidia-smi reports."""
    return {f"card-{index}": mib * 2**20 for index, mib in _smi_mib("gpu=index,memory.used")}
