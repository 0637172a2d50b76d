"""Reads training progress from trainer 0's metrics server (GET /progress)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from pydantic import ValidationError

from distgnn_api.contract import PROGRESS_PATH
from distgnn_api.spec import Progress


def progress_url(pod_ip: str, port: int) -> str:
    """URL of a pod's progress endpoint (IPv6 addresses bracketed)."""
    host = f"[{pod_ip}]" if ":" in pod_ip else pod_ip
    return f"http://{host}:{port}{PROGRESS_PATH}"


def fetch_progress(pod_ip: str, port: int, timeout: float) -> Progress | None:
    """The trainer's Progress, or None when it is unreachable or answers something else.

    Unreachable is normal (the trainer is starting, or the pod has no real network), so it is
    not an error.
    """
    try:
        with urllib.request.urlopen(progress_url(pod_ip, port), timeout=timeout) as response:
            body = response.read(1 << 20)
    except (OSError, urllib.error.URLError, ValueError):
        return None
    try:
        return Progress.model_validate(json.loads(body))
    except (ValueError, ValidationError):
        return None
