"""The zygote launcher with real processes: a forked child is the process ``python -m``
would start (argv, env, cwd, its own session, its output, its exit code), with torch already
imported and its own thread count; what it cannot serve falls back to a fresh interpreter."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distgnn_api.contract import Role
from distgnn_operator.local.launch_plan import ProcessSpec
from distgnn_operator.local.supervisor import Exited, Supervisor
from distgnn_operator.local.zygote import Zygote, ZygoteChild, module_of

# a zygote that imported torch, and the children it forks: processes, not the unit tier
pytestmark = pytest.mark.slow

STANDIN = textwrap.dedent(
    """
    import json, os, sys, time
    preloaded = "torch" in sys.modules
    import torch
    report = {
        "preloaded": preloaded,
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
        "tag": os.environ.get("STANDIN_TAG"),
        "pgid": os.getpgid(0),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "threads": torch.get_num_threads(),
        "name": __name__,
    }
    print(json.dumps(report))
    print("to stderr", file=sys.stderr)
    if "--sleep" in sys.argv:
        time.sleep(60)
    sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
    """
)


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    (tmp_path / "standin_role.py").write_text(STANDIN)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "2"}
    z = Zygote(env=env)
    yield z
    z.close()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), **extra}


def _report(child: ZygoteChild) -> tuple[dict[str, object], list[str]]:
    assert child.stdout is not None
    lines = child.stdout.read().decode().splitlines()
    return json.loads(lines[0]), lines[1:]


def test_a_forked_child_is_the_process_python_m_would_start(zygote: Zygote, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    argv = [sys.executable, "-P", "-m", "standin_role", "--flag", "7"]
    env = _env(tmp_path, STANDIN_TAG="t1", OMP_NUM_THREADS="1")
    assert zygote.serves(argv, env)
    child = zygote.start(argv, env, work)
    assert child.wait(timeout=60) == 7
    report, rest = _report(child)
    assert report["preloaded"] is True  # torch came with the fork
    assert report["argv"] == ["--flag", "7"]
    assert report["name"] == "__main__"
    assert report["cwd"] == str(work)
    assert report["tag"] == "t1"
    assert report["pid"] == child.pid == report["pgid"]  # its own process group
    assert report["ppid"] != os.getpid()  # forked by the zygote, not by us
    assert report["threads"] == 1  # its own OMP_NUM_THREADS, not the zygote's 2
    assert rest == ["to stderr"]


def test_exit_codes_follow_popen_and_a_signal_is_negative(zygote: Zygote, tmp_path: Path) -> None:
    env = _env(tmp_path)
    ok = zygote.start([sys.executable, "-m", "standin_role"], env, tmp_path)
    sleeper = zygote.start([sys.executable, "-m", "standin_role", "--sleep"], env, tmp_path)
    assert ok.wait(timeout=60) == 0
    assert sleeper.poll() is None
    assert sleeper.stdout is not None
    sleeper.stdout.readline()  # it started
    os.killpg(sleeper.pid, signal.SIGTERM)
    assert sleeper.wait(timeout=30) == -signal.SIGTERM
    assert sleeper.poll() == -signal.SIGTERM


def test_what_the_zygote_cannot_serve_is_left_to_a_fresh_interpreter(
    zygote: Zygote, tmp_path: Path
) -> None:
    env = _env(tmp_path)
    assert not zygote.serves([sys.executable, "-c", "pass"], env)
    assert not zygote.serves(["/usr/bin/python3", "-m", "standin_role"], env)
    assert not zygote.serves([sys.executable, "-m", "standin_role"], {**env, "PYTHONPATH": "/x"})
    gpu = {**env, "CUDA_VISIBLE_DEVICES": "0"}
    assert not zygote.serves([sys.executable, "-m", "standin_role"], gpu)
    assert zygote.serves(
        [sys.executable, "-m", "standin_role"], {**gpu, "CUDA_VISIBLE_DEVICES": ""}
    )
    assert module_of([sys.executable, "-u", "-m", "a.b", "x"]) == ("a.b", ["x"])
    assert module_of([sys.executable, "-m"]) is None


def test_a_dead_zygote_ends_its_children_instead_of_leaving_them_unwaited(
    zygote: Zygote, tmp_path: Path
) -> None:
    child = zygote.start(
        [sys.executable, "-m", "standin_role", "--sleep"], _env(tmp_path), tmp_path
    )
    assert child.stdout is not None
    child.stdout.readline()
    assert zygote._proc is not None
    zygote._proc.kill()
    assert child.wait(timeout=30) == -signal.SIGKILL
    assert not zygote.serves([sys.executable, "-m", "standin_role"], _env(tmp_path))


def test_the_supervisor_forks_python_m_processes_and_relays_their_logs(tmp_path: Path) -> None:
    (tmp_path / "standin_role.py").write_text(STANDIN)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    spec = ProcessSpec(
        role=Role.trainer,
        rank=0,
        argv=(sys.executable, "-P", "-m", "standin_role", "3"),
        env=env,
        cwd=tmp_path,
        log_path=tmp_path / "logs" / "trainer-0.log",
    )
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tmp_path)  # the zygote's import path is the launcher's
    try:
        with Supervisor(grace_period_s=2, preload=True) as sup:
            sup.start(spec)
            deadline = time.monotonic() + 60
            notice = sup.notices.get(timeout=60)
            while not isinstance(notice, Exited) and time.monotonic() < deadline:
                notice = sup.notices.get(timeout=60)
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = before
    assert isinstance(notice, Exited)
    assert notice.returncode == 3
    first, second = spec.log_path.read_text().splitlines()
    assert json.loads(first)["preloaded"] is True
    assert second == "to stderr"
