"""One GET of a running process's HTTP endpoint (metrics, progress), tolerant of its life."""

from __future__ import annotations

import http.client
import urllib.request


def get_body(url: str, timeout: float = 2.0) -> str | None:
    """The body at ``url``, or None when nothing answers: the process is not serving yet,
    no longer, or exited in the middle of the answer (``http.client.IncompleteRead``)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return str(resp.read().decode())
    except (OSError, http.client.HTTPException):  # URLError is an OSError
        return None
