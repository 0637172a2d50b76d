"""SpecError: an invalid job's errors as field paths with fixes, from pydantic's ValidationError."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError


class SpecError(ValueError):
    """An invalid job: each entry names a field path and says how to fix it."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in errors))


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def explain(err: ValidationError, prefix: str) -> SpecError:
    items: list[tuple[str, str]] = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        path = _format_loc(loc)
        msg = str(e["msg"]).removeprefix("Value error, ")
        # A rule's message already names its field: "<path>: <message>".
        if ": " in msg and e["type"] == "value_error":
            sub, _, rest = msg.partition(": ")
            path = ".".join(x for x in (path, sub) if x)
            msg = rest
        items.append((".".join(x for x in (prefix, path) if x), msg))
    return SpecError(items)


def strict_json(data: Any) -> str:
    """A document as JSON, read in strict mode: like the API server, no '5' for 5, no 'yes'
    for true."""
    try:
        return json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise SpecError([("", f"not a JSON document: {err}")]) from None
