"""Completion and exit codes of the sampler and trainer entry points.

DESIGN's completion rule: trainer 0 writes ``result.json`` for the job UID when training
finishes and every process exits 0. StatefulSet pods restart on exit, so a process that
starts and finds that result exits 0 at once. Exit codes follow the contract: 2 for bad
input (restarting cannot help), 1 for internal errors (a gang restart may help).
"""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from distgnn_api.contract import (
    ENV_CONFIG,
    ENV_JOB_UID,
    ENV_LOG_LEVEL,
    EXIT_BAD_INPUT,
    EXIT_INTERNAL_ERROR,
    EXIT_OK,
    RESULT_FILE,
    ContractError,
    JobConfig,
    Result,
    WorkloadEnv,
    dump_json,
)
from distgnn_api.spec import SpecError
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.partition.meta import StoreError

log = logging.getLogger(__name__)


class BadInputError(Exception):
    """The job config or the data on the volume is invalid; the message says how to fix it."""


def result_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / RESULT_FILE


def finished_result(run_dir: str | Path, job_uid: str) -> Result | None:
    """The job's result if training already completed, else None."""
    path = result_path(run_dir)
    if not path.exists():
        return None
    try:
        result = Result.model_validate_json(path.read_text())
    except (OSError, ValueError) as err:
        raise BadInputError(
            f"{path} exists but is not a distgnn result ({err}); remove it to train again"
        ) from None
    if result.job_uid != job_uid:
        raise BadInputError(
            f"{path} belongs to job UID {result.job_uid}, not {job_uid} ({ENV_JOB_UID}); "
            "each job run needs its own run directory"
        )
    return result


def write_result(run_dir: str | Path, result: Result) -> Path:
    path = result_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    dump_json(path, result)
    return path


def load_config(env: WorkloadEnv) -> JobConfig:
    """The job config, with errors that name the file and the field."""
    path = env.config_path
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise BadInputError(
            f"cannot read the job config {path} ({ENV_CONFIG}): {err.strerror or err}"
        ) from None
    try:
        config = JobConfig.model_validate_json(text)
    except ValidationError as err:
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:5]
        )
        raise BadInputError(f"the job config {path} is invalid: {fields}") from None
    if config.uid != env.job_uid:
        raise BadInputError(
            f"the job config {path} is for job UID {config.uid} but {ENV_JOB_UID} is "
            f"{env.job_uid}; the config and the environment must come from the same job"
        )
    return config


BAD_INPUT_ERRORS: tuple[type[BaseException], ...] = (
    BadInputError,
    ContractError,
    SpecError,
    ValidationError,
    StoreError,
    DatasetError,
)
"""Errors that a restart cannot fix: the job config, the dataset or the partition store."""


def configure_logging(prefix: str) -> None:
    """Log to stderr with the process's name; SIGUSR1 prints the stack of every thread to
    stderr (a stuck process can be read without stopping it: ``kill -USR1 <pid>``)."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    level = (WorkloadEnv.setting(ENV_LOG_LEVEL) or "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format=f"%(asctime)s {prefix} %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def exit_code_of(err: BaseException) -> int:
    """The contract exit code for an exception escaping an entry point."""
    return EXIT_BAD_INPUT if isinstance(err, BAD_INPUT_ERRORS) else EXIT_INTERNAL_ERROR


_EXIT_DECIDED = threading.Lock()


def claim_exit(*, wait: bool = True) -> bool:
    """Decide this process's exit code, once: the entry point and a watchdog thread may both
    want to end the process. The first to claim decides; a watchdog (``wait=False``) that
    comes second stands down, and an entry point that comes second waits for the watchdog's
    ``os._exit``. Never released: after the claim, the process only ends."""
    return _EXIT_DECIDED.acquire(blocking=wait)


def exit_code(
    main: Callable[[], int], role: str, *, decide: Callable[[], object] = lambda: None
) -> int:
    """Run an entry point; errors become the contract's exit code and one line on stderr.

    ``decide`` runs once the code is known, before an error is printed: a process that ends
    passes :func:`claim_exit`, so that a watchdog cannot end it with another code between
    the message and the exit."""
    error: BaseException | None = None
    try:
        code = main()
    except KeyboardInterrupt:
        code = EXIT_INTERNAL_ERROR
    except SystemExit as err:
        code = err.code if isinstance(err.code, int) else EXIT_INTERNAL_ERROR
    except BaseException as err:
        error = err
        code = exit_code_of(err)
    decide()
    if error is not None:
        if code == EXIT_INTERNAL_ERROR:
            traceback.print_exception(error)
        kind = "bad input" if code == EXIT_BAD_INPUT else "internal error"
        print(f"distgnn {role}: {kind}: {error}", file=sys.stderr, flush=True)
    return code if code is not None else EXIT_OK
