"""The supervisor against stand-in processes: logs, progress lines, exits, stopping groups."""

from __future__ import annotations

import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

from distgnn_api.contract import Role
from distgnn_operator.local.launch_plan import ProcessSpec
from distgnn_operator.local.supervisor import (
    PROCESS_TABLE,
    Exited,
    Progressed,
    Supervisor,
    log_tail,
    read_process_table,
)
from tests.local.process_table import processes_with_env

TAG = "DISTGNN_TEST_TAG"


def _spec(tmp_path: Path, tag: str, name: str, code: str, rank: int = 0) -> ProcessSpec:
    return ProcessSpec(
        role=Role.trainer,
        rank=rank,
        argv=(sys.executable, "-c", code),
        env={"PATH": "/usr/bin:/bin", TAG: tag, "PYTHONUNBUFFERED": "1"},
        cwd=tmp_path,
        log_path=tmp_path / "logs" / f"{name}.log",
    )


def _next_exit(sup: Supervisor, timeout: float = 20.0) -> Exited:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        notice = sup.notices.get(timeout=deadline - time.monotonic())
        if isinstance(notice, Exited):
            return notice
    raise AssertionError("no exit seen")


def test_log_progress_and_exit_code(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    code = (
        "import sys\n"
        "from distgnn_api.contract import emit_progress\n"
        "print('hello from the stand-in')\n"
        "emit_progress('epoch', 3, 10, epoch=1, loss=0.5)\n"
        "print('an error line', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    spec = _spec(tmp_path, tag, "trainer-0", code)
    with Supervisor(grace_period_s=2) as sup:
        sup.start(spec)
        notices: list[Progressed | Exited] = []
        while not any(isinstance(n, Exited) for n in notices):
            notices.append(sup.notices.get(timeout=20))
    progress = [n for n in notices if isinstance(n, Progressed)]
    assert [(p.event.stage, p.event.done, p.event.metrics["loss"]) for p in progress] == [
        ("epoch", 3, 0.5)
    ]
    last = notices[-1]
    assert isinstance(last, Exited)
    assert last.returncode == 3
    log = spec.log_path.read_text()
    assert "hello from the stand-in" in log
    assert "an error line" in log
    # The tail drops progress lines: they are drawn as bars, not read.
    assert log_tail(spec.log_path) == ["hello from the stand-in", "an error line"]


def _leader_with_grandchild(ready: str, *, ignore_sigterm: bool = False) -> str:
    """Code of a leader that starts a sleeping grandchild in its group, prints ``ready`` and
    sleeps; with ``ignore_sigterm`` it ignores SIGTERM."""
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_sigterm else ""
    return (
        f"import signal, subprocess, sys, time\n{ignore}"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"print({ready!r}, flush=True)\n"
        "time.sleep(600)\n"
    )


def _wait_for_processes(tag: str, count: int) -> None:
    """Until ``count`` processes carry the tag, for at most 20 s."""
    deadline = time.monotonic() + 20
    while len(processes_with_env(TAG, tag)) != count and time.monotonic() < deadline:
        time.sleep(0.05)


def test_stop_kills_the_whole_group_even_if_sigterm_is_ignored(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    # A leader that ignores SIGTERM and a grandchild of its own in the same group.
    code = _leader_with_grandchild("ready", ignore_sigterm=True)
    spec = _spec(tmp_path, tag, "sampler-0", code)
    sup = Supervisor(grace_period_s=0.5)
    sup.start(spec)
    _wait_for_processes(tag, 2)
    assert len(processes_with_env(TAG, tag)) == 2
    sup.stop()
    assert processes_with_env(TAG, tag) == []
    assert _next_exit(sup).returncode == -9


def test_first_failure_is_reported_first_and_the_rest_can_be_stopped(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    sleeper = _spec(tmp_path, tag, "trainer-0", "import time; time.sleep(600)", rank=0)
    failing = _spec(tmp_path, tag, "trainer-1", "import sys; sys.exit(1)", rank=1)
    with Supervisor(grace_period_s=5) as sup:
        sup.start(sleeper)
        sup.start(failing)
        first = _next_exit(sup)
        assert (first.spec.name, first.returncode) == ("trainer-1", 1)
        assert [s.name for s in sup.running()] == ["trainer-0"]
        sup.stop(["trainer-0"])
        assert sup.running() == []
        second = _next_exit(sup)
        # A cooperative process exits on SIGTERM, well before the grace period.
        assert (second.spec.name, second.returncode) == ("trainer-0", -15)
    assert processes_with_env(TAG, tag) == []


def test_one_process_is_signalled_waited_for_and_restarted(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    spec = _spec(tmp_path, tag, "trainer-1", _leader_with_grandchild("started"), rank=1)
    with Supervisor(grace_period_s=2) as sup:
        sup.start(spec)
        with pytest.raises(RuntimeError, match="trainer-1 is still running"):
            sup.start(spec)
        _wait_for_processes(tag, 2)
        assert sup.poll("trainer-1") is None
        assert sup.wait("trainer-1", 0.1) is None
        # A stopped pod: the process and what it started are stopped, not gone.
        sup.signal("trainer-1", signal.SIGSTOP)
        assert sup.poll("trainer-1") is None
        # A lost pod: SIGKILL to the whole group.
        sup.signal("trainer-1", signal.SIGKILL)
        assert sup.wait("trainer-1", 20) == -signal.SIGKILL
        _wait_for_processes(tag, 0)
        assert processes_with_env(TAG, tag) == []
        # Restarted like a pod: same name, the log grows.
        sup.start(spec)
        deadline = time.monotonic() + 20
        while spec.log_path.read_text().count("started") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sup.poll("trainer-1") is None
        with pytest.raises(KeyError, match="no process 'trainer-9'"):
            sup.poll("trainer-9")
    assert spec.log_path.read_text().count("started") == 2
    assert processes_with_env(TAG, tag) == []


def test_the_process_table_lists_each_process_its_settings_and_its_exit(tmp_path: Path) -> None:
    """``processes.json``: pid, the DISTGNN_* settings (not the rest of the environment)
    and the exit code once seen; a restarted name gets its new pid and no exit code."""
    tag = uuid.uuid4().hex
    run_dir = tmp_path / "run"
    table = run_dir / PROCESS_TABLE
    quick = _spec(tmp_path, tag, "trainer-0", "import sys; sys.exit(4)")
    slow = _spec(tmp_path, tag, "trainer-1", "import time; time.sleep(600)", rank=1)
    with Supervisor(grace_period_s=2, table=table) as sup:
        sup.start(quick)
        sup.start(slow)
        assert _next_exit(sup).returncode == 4
        entries = read_process_table(run_dir)
        assert set(entries) == {"trainer-0", "trainer-1"}
        assert entries["trainer-0"].exit_code == 4
        assert entries["trainer-1"].exit_code is None
        assert entries["trainer-1"].pid == sup.pid("trainer-1")
        assert entries["trainer-1"].env == {TAG: tag}  # PATH and the rest are left out
        again = _spec(tmp_path, tag, "trainer-0", "import time; time.sleep(600)")
        sup.start(again)
        entries = read_process_table(run_dir)
        assert entries["trainer-0"].exit_code is None
        assert entries["trainer-0"].pid == sup.pid("trainer-0")
    entries = read_process_table(run_dir)
    assert all(e.exit_code is not None for e in entries.values())  # stopped: every exit seen
