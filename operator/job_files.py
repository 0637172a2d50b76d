"""Job files for the ``distgnn`` command: every DistGNNJob in a YAML file (or stdin), parsed with
the CRD's own rules; errors name the file, the document and the field."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from distgnn_api.contract import EXIT_BAD_INPUT
from distgnn_api.spec import KIND, DistGNNJob, SpecError, parse_job


class CliError(Exception):
    """A user-facing error: printed without a traceback, exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise CliError(f"{path}: cannot read the job file: {err}") from None


def _documents(path: str) -> list[Any]:
    try:
        docs = [d for d in yaml.safe_load_all(_read(path)) if d is not None]
    except yaml.YAMLError as err:
        where = ""
        mark = getattr(err, "problem_mark", None)
        if mark is not None:
            where = f":{mark.line + 1}:{mark.column + 1}"
        problem = getattr(err, "problem", None) or str(err)
        raise CliError(f"{path}{where}: malformed YAML: {problem}") from None
    if not docs:
        raise CliError(f"{path}: no YAML document; expected a {KIND}")
    return docs


def load_jobs(path: str) -> list[DistGNNJob]:
    """Every DistGNNJob in a YAML file; errors name the file, document and field."""
    docs = _documents(path)
    # In a stream of several kinds, only the DistGNNJobs are ours to check.
    if len(docs) > 1:
        docs = [d for d in docs if isinstance(d, dict) and d.get("kind") == KIND]
        if not docs:
            raise CliError(f"{path}: none of its documents is a {KIND}")
    jobs = []
    for index, doc in enumerate(docs):
        where = path if len(docs) == 1 else f"{path} (document {index + 1})"
        if not isinstance(doc, dict):
            raise CliError(
                f"{where}: the top level is a {type(doc).__name__}; a {KIND} is a mapping "
                "with apiVersion, kind, metadata and spec"
            )
        try:
            jobs.append(parse_job(doc))
        except SpecError as err:
            lines = "\n".join(f"  {field or '(document)'}: {msg}" for field, msg in err.errors)
            raise CliError(f"{where}: invalid {KIND}:\n{lines}") from None
    return jobs


def load_job(path: str) -> DistGNNJob:
    """The one DistGNNJob in a file."""
    jobs = load_jobs(path)
    if len(jobs) != 1:
        raise CliError(f"{path}: holds {len(jobs)} {KIND}s; give a file with exactly one")
    return jobs[0]
