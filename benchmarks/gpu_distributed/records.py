"""The benchmark's JSON lines: printed, and appended to ``--out``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(out: Path | None, record: dict[str, Any]) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    if out is not None:
        with open(out, "a") as f:
            f.write(line + "\n")
