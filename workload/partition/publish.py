"""Staging and publishing a partition store: written into a temporary sibling directory,
completed with META.json and ``_SUCCESS`` (written last), then published with one rename, so
a reader never sees a half-written store and a killed writer leaves only a temporary
directory, removed by the next run."""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from distgnn_api.contract import PARTITION_FORMAT_VERSION, SUCCESS_MARKER, rfc3339_now
from distgnn_workload.partition.meta import META_FILE, is_complete

log = logging.getLogger(__name__)

StoreT = TypeVar("StoreT")


def temp_prefix(out_dir: Path) -> str:
    """Name prefix of the temporary directories a writer of ``out_dir`` creates beside it."""
    return f".{out_dir.name}.tmp-"


def remove_stale_temps(out_dir: str | Path) -> list[Path]:
    """Delete temporary directories left beside ``out_dir`` by killed writers.

    Only one partitioner may write a key at a time (the operator runs one Job per key).
    """
    out_dir = Path(out_dir)
    removed = []
    if out_dir.parent.is_dir():
        for entry in out_dir.parent.iterdir():
            if entry.name.startswith(temp_prefix(out_dir)) and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def stage_store(
    out_dir: Path,
    write: Callable[[Path], dict[str, Any]],
    *,
    key: str | None,
    algorithm: str,
    partition_spec: dict[str, Any] | None,
    graph_info: Mapping[str, Any],
    steps: dict[str, float],
    extra_meta: Mapping[str, Any] | None,
    overwrite: bool,
    reopen: Callable[[Path], StoreT],
) -> StoreT:
    """Write a store into a temporary sibling of ``out_dir`` (``write`` fills it and returns
    its META.json), complete its META.json, write ``_SUCCESS`` last and publish it in one
    rename; on any error the temporary directory goes."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f"{temp_prefix(out_dir)}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        meta = write(tmp)
        meta.update(
            key=key,
            algorithm=algorithm,
            partition_spec=partition_spec,
            graph_info=graph_info,
            step_seconds=steps,
            created_at=rfc3339_now(),
        )
        if extra_meta:
            meta.update(extra_meta)
        write_json(tmp / META_FILE, meta)
        write_json(
            tmp / SUCCESS_MARKER,
            {"key": key, "format_version": PARTITION_FORMAT_VERSION, "finished_at": rfc3339_now()},
        )
        fsync_path(tmp)
        return publish(tmp, out_dir, overwrite=overwrite, reopen=reopen)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: Path, obj: Mapping[str, Any]) -> None:
    part = path.with_name(path.name + ".part")
    with open(part, "w") as f:
        json.dump(obj, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)


def publish(
    tmp: Path, out_dir: Path, *, overwrite: bool, reopen: Callable[[Path], StoreT]
) -> StoreT:
    """Move the finished temporary directory to ``out_dir`` in one rename; ``reopen`` opens
    the published store (or the one another writer completed meanwhile)."""
    parent = out_dir.parent
    if out_dir.exists():
        if is_complete(out_dir) and not overwrite:
            log.info("%s was completed by another writer meanwhile; keeping it", out_dir)
            shutil.rmtree(tmp, ignore_errors=True)
            return reopen(out_dir)
        # An incomplete leftover (or an overwrite): move it aside, then swap in ours.
        trash = parent / f"{temp_prefix(out_dir)}old-{uuid.uuid4().hex[:8]}"
        os.rename(out_dir, trash)
        os.rename(tmp, out_dir)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        try:
            os.rename(tmp, out_dir)
        except OSError:
            if not is_complete(out_dir):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    fsync_path(parent)
    return reopen(out_dir)
