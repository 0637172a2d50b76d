"""``distgnn run``: a DistGNNJob's partition step, samplers and trainers as local processes.

The phases follow the operator: the partition Job runs first unless a complete partition
with the same content key is on the volume; then samplers and trainers start together and
the job succeeds when every trainer exits 0. Unlike the cluster, a failed process is not
restarted: the run stops, and ``--uid`` resumes it from its last checkpoint.
"""

from __future__ import annotations

import queue
import signal
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.markup import escape

from distgnn_api.contract import (
    CHECKPOINT_DIR,
    EXIT_BAD_INPUT,
    EXIT_INTERNAL_ERROR,
    EXIT_OK,
    RESULT_FILE,
    SUCCESS_MARKER,
    Result,
    partition_dir,
    partition_key,
    run_dir,
)
from distgnn_api.spec import DistGNNJob, DistGNNJobSpec, EvaluationKind
from distgnn_operator.local.job_plan import (
    LOCAL_NAMESPACE,
    JobPlan,
    check_supported,
    plan_job,
    render_job,
)
from distgnn_operator.local.launch_plan import LocalLayout, ProcessSpec
from distgnn_operator.local.ports import LOOPBACK
from distgnn_operator.local.progress_view import ProgressView
from distgnn_operator.local.supervisor import (
    DEFAULT_GRACE_PERIOD_S,
    PROCESS_TABLE,
    Exited,
    Progressed,
    Supervisor,
    log_tail,
)

_TAIL_LINES = 30
_KIND_TEXT = {
    EvaluationKind.full: "(full neighbourhood)",
    EvaluationKind.sampled: "(sampled at the training fanout)",
}


@dataclass(frozen=True)
class RunOptions:
    """What the user chose on the command line."""

    data_dir: Path
    job_file: str = "JOB.yaml"
    run_dir: Path | None = None
    uid: str | None = None
    gpus: int | None = None
    grace_period_s: float = DEFAULT_GRACE_PERIOD_S
    preload: bool = False
    metrics_address: str = LOOPBACK


class _Outcome(Enum):
    succeeded = "succeeded"
    failed = "failed"
    interrupted = "interrupted"
    deadline = "deadline"


@dataclass(frozen=True)
class _PhaseResult:
    outcome: _Outcome
    failure: Exited | None = None


class LocalRun:
    """One ``distgnn run`` of a job: its layout, its processes and what the user sees."""

    def __init__(self, job: DistGNNJob, options: RunOptions, console: Console) -> None:
        self.job = job
        self.spec = job.spec
        self.options = options
        self.console = console
        self.uid = options.uid or str(uuid.uuid4())
        data_dir = options.data_dir.expanduser().resolve()
        self.layout = LocalLayout(
            job_name=job.metadata.name,
            namespace=LOCAL_NAMESPACE,
            data_dir=data_dir,
            run_dir=(options.run_dir or run_dir(data_dir, self.uid)).expanduser().resolve(),
            metrics_address=options.metrics_address,
        )
        self.partition_path = partition_dir(data_dir, partition_key(self.spec))
        self._signal: int | None = None
        self._started = time.monotonic()

    # ------------------------------------------------------------------ entry

    def run(self) -> int:
        """Run the job to the end; the exit code for the shell."""
        from distgnn_operator.local.devices import visible_gpus

        self.layout = replace(self.layout, gpus=tuple(visible_gpus(self.options.gpus)))
        reused = (self.partition_path / SUCCESS_MARKER).exists()
        finished_before = (self.layout.run_dir / RESULT_FILE).exists()
        rendered = render_job(self.job.metadata.name, self.uid, self.spec, partition_reused=reused)
        plan = plan_job(self.layout, rendered)
        self._header(reused)

        sup = Supervisor(
            self.options.grace_period_s,
            preload=self.options.preload,
            table=self.layout.run_dir / PROCESS_TABLE,
        )
        with self._signals(sup):
            try:
                with ProgressView(self.console) as view:
                    result, timings = self._phases(sup, view, plan)
            finally:
                sup.stop()
        if result.outcome is not _Outcome.succeeded:
            return self._report_stop(result)
        return self._summary(reused, timings, finished_before)

    # ------------------------------------------------------------------ phases

    def _phases(
        self, sup: Supervisor, view: ProgressView, plan: JobPlan
    ) -> tuple[_PhaseResult, dict[str, float]]:
        """The partition step (unless reused), then samplers and trainers together."""
        timings: dict[str, float] = {}
        if plan.partition:
            t0 = time.monotonic()
            result = self._phase(sup, view, plan.partition, required=plan.partition)
            if result.outcome is not _Outcome.succeeded:
                return result, timings
            timings["partition"] = time.monotonic() - t0
        return self._phase(sup, view, plan.workload, required=plan.trainers), timings

    def _phase(
        self,
        sup: Supervisor,
        view: ProgressView,
        specs: Sequence[ProcessSpec],
        required: Sequence[ProcessSpec],
    ) -> _PhaseResult:
        """Start processes and wait until every required one exits 0, one fails, or a stop."""
        for spec in specs:
            sup.start(spec)
        pending = {s.name for s in required}
        deadline = self.spec.run_policy.active_deadline_seconds
        while pending:
            if self._signal is not None:
                running = len(sup.running())
                view.message(f"[yellow]Interrupted: stopping {running} processes…[/]")
                return _PhaseResult(_Outcome.interrupted)
            if deadline is not None and time.monotonic() - self._started > deadline:
                return _PhaseResult(_Outcome.deadline)
            try:
                notice = sup.notices.get(timeout=0.1)
            except queue.Empty:
                continue
            if isinstance(notice, Progressed):
                view.show(notice.spec.role, notice.spec.rank, notice.event)
            elif notice.returncode != 0:
                return _PhaseResult(_Outcome.failed, failure=notice)
            else:
                pending.discard(notice.spec.name)
        return _PhaseResult(_Outcome.succeeded)

    # ------------------------------------------------------------------ reports

    def _header(self, reused: bool) -> None:
        spec = self.spec
        devices = (
            f"GPUs {','.join(self.layout.gpus)} (NCCL)"
            if self.layout.gpus and spec.trainers.gpus_per_pod
            else "CPU (gloo)"
        )
        self.console.print(
            f"[bold]distgnn run[/] {self.job.metadata.name}  uid {self.uid}\n"
            f"  {job_shape(spec)}, {spec.training.epochs} epochs on {devices}\n"
            f"  partition  {self.partition_path}"
            + ("  [green](complete: reused)[/]" if reused else "")
            + f"\n  run dir    {self.layout.run_dir}",
            highlight=False,
        )

    def _report_stop(self, result: _PhaseResult) -> int:
        """Say why the run ended, once every process has stopped; the exit code."""
        elapsed = _duration(time.monotonic() - self._started)
        logs = self.layout.log_dir
        resume = f"distgnn run {self.options.job_file} --uid {self.uid} --data-dir {self.layout.data_dir}"
        if self.options.run_dir:
            resume += f" --run-dir {self.layout.run_dir}"
        if result.outcome is _Outcome.interrupted:
            self.console.print(
                f"[yellow]Stopped after {elapsed}[/]; every process has exited. Logs: {logs}\n"
                f"Resume from the last checkpoint with: {resume}",
                highlight=False,
            )
            return 128 + (self._signal or signal.SIGINT)
        if result.outcome is _Outcome.deadline:
            self.console.print(
                f"[red]Failed:[/] spec.runPolicy.activeDeadlineSeconds "
                f"({self.spec.run_policy.active_deadline_seconds}s) exceeded after {elapsed}; "
                f"stopped every process. Logs: {logs}",
                highlight=False,
            )
            return EXIT_INTERNAL_ERROR
        failure = result.failure
        assert failure is not None
        code = failure.returncode
        why = (
            f"was killed by {signal.Signals(-code).name}"
            if code < 0
            else f"exited with code {code}"
            + (
                " (bad input: the dataset or job config is invalid)"
                if code == EXIT_BAD_INPUT
                else ""
            )
        )
        self.console.print(
            f"[bold red]Failed:[/] {failure.spec.name} {why} after {elapsed}; "
            "stopped the other processes.",
            highlight=False,
        )
        tail = log_tail(failure.spec.log_path, _TAIL_LINES)
        lines = f"{len(tail)} line{'' if len(tail) == 1 else 's'}"
        self.console.print(
            f"Last {lines} of its log, {failure.spec.log_path}:"
            if tail
            else f"Its log is empty: {failure.spec.log_path}",
            highlight=False,
        )
        for line in tail:
            self.console.print(f"  | {line}", markup=False, highlight=False)
        self.console.print(f"Logs of every process: {logs}", highlight=False)
        return EXIT_BAD_INPUT if code == EXIT_BAD_INPUT else EXIT_INTERNAL_ERROR

    def _summary(self, reused: bool, timings: Mapping[str, float], finished_before: bool) -> int:
        result_path = self.layout.run_dir / RESULT_FILE
        if not result_path.exists():
            self.console.print(
                f"[bold red]Failed:[/] every trainer exited 0 but none wrote {result_path}. "
                f"Logs: {self.layout.log_dir}",
                highlight=False,
            )
            return EXIT_INTERNAL_ERROR
        result = Result.model_validate_json(result_path.read_text())
        if result.test_link is not None:
            figure_name, accuracy = "test ranking", result.test_link.summary()
            if result.val_link is not None:
                accuracy += f"  (validation MRR {result.val_link.mrr:.4f})"
        else:
            figure_name = "test accuracy"
            accuracy = f"{result.test_accuracy or 0.0:.4f} {_KIND_TEXT[result.test_accuracy_kind]}"
            if result.val_accuracy is not None:
                kind = result.val_accuracy_kind
                accuracy += f"  (validation {result.val_accuracy:.4f}"
                accuracy += f" {_KIND_TEXT[kind]})" if kind is not None else ")"
        elapsed = f"{_duration(time.monotonic() - self._started)} in total"
        if "partition" in timings:
            elapsed += f", partition {_duration(timings['partition'])}"
        elapsed += f", training {_duration(result.elapsed_seconds)}"
        rows = (
            (figure_name, accuracy),
            ("throughput", f"{result.seeds_per_second:,.0f} seeds/s over {result.epochs} epochs"),
            ("elapsed", elapsed),
            ("partition", f"{self.partition_path}" + ("  (reused)" if reused else "")),
            ("checkpoints", str(self.layout.run_dir / CHECKPOINT_DIR)),
            ("logs", str(self.layout.log_dir)),
            ("result", str(result_path)),
        )
        note = "  (this run had finished before: nothing left to train)" if finished_before else ""
        self.console.print(
            f"[bold green]Succeeded:[/] {self.job.metadata.name}{note}", highlight=False
        )
        for label, value in rows:
            self.console.print(f"  [bold]{label:<14}[/]{escape(value)}", highlight=False)
        return EXIT_OK

    # ------------------------------------------------------------------ signals

    @contextmanager
    def _signals(self, sup: Supervisor) -> Iterator[None]:
        """SIGINT/SIGTERM/SIGHUP stop the run in order; a second one kills at once."""

        def handler(signum: int, frame: FrameType | None) -> None:
            if self._signal is not None:
                sup.kill_now()
            self._signal = signum

        sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        previous = {s: signal.signal(s, handler) for s in sigs}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)


def job_shape(spec: DistGNNJobSpec) -> str:
    """'2 trainers, 1 sampler, 2 partitions' (or worker mode)."""

    def count(n: int, noun: str) -> str:
        return f"{n} {noun}{'' if n == 1 else 's'}"

    holders = "worker mode" if spec.worker_mode else count(spec.samplers.replicas, "sampler")
    return (
        f"{count(spec.trainers.replicas, 'trainer')}, {holders}, "
        f"{count(spec.num_partitions, 'partition')}"
    )


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def run_job(job: DistGNNJob, options: RunOptions, console: Console) -> int:
    """Run a job as local processes; the exit code for the shell.

    Raises :class:`UnsupportedJobError` for a job the workload cannot run yet.
    """
    check_supported(job.spec)
    return LocalRun(job, options, console).run()
