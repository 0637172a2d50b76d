"""The error raised for invalid dataset input; the partition entry point maps it to exit code 2."""

from __future__ import annotations

from pathlib import Path


class DatasetError(ValueError):
    """A dataset that cannot be used as given: the message names the file, line or field and the fix."""

    def __init__(self, message: str, *, source: str | Path | None = None, line: int | None = None):
        self.source = None if source is None else str(source)
        self.line = line
        where = ""
        if self.source is not None:
            where = self.source + (f" line {line}" if line is not None else "") + ": "
        super().__init__(where + message)
