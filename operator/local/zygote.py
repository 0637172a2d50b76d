"""Starts local Python processes from a parent that imported torch once (a zygote).

A workload process spends seconds of CPU importing torch and PyG before it does anything.
``distgnn run`` starts several of them, again on every restart, and on a machine of few cores
they wait for each other. The zygote is one process that imports the heavy libraries once and
then forks a child for each ``python -m MODULE ARGS`` the launcher asks for: the child gets its
own session (process group), its environment, working directory and argv, its stdout and
stderr on the pipe the launcher reads, and runs the module as ``python -m`` would.

Only processes that use no GPU are started this way: a forked child may not use a CUDA context
of its parent, and the zygote must not touch the driver. The zygote runs no thread and no torch
operation, so forking it is safe; each child applies its own ``OMP_NUM_THREADS``.

The launcher side (:class:`Zygote`) talks to it over a socket pair: a request carries the
argv, env and cwd with the pipe's descriptor; the zygote answers with the child's pid, and
reports each exit (``os.waitstatus_to_exitcode``: negative for a signal) when it reaps it.

Run as ``python -m distgnn_operator.local.zygote FD`` (started by :class:`Zygote`). The
modules it preloads are imported by name, so the operator itself never imports torch.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import queue
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

PRELOAD = ("torch", "torch.distributed.rpc", "torch_geometric")
"""Imported once by the zygote; a module that is not installed is left out."""

_MAX_MESSAGE = 1 << 20
_INTERPRETER_FLAGS = frozenset({"-P", "-u", "-B", "-E", "-s"})


def module_of(argv: Sequence[str], python: str = sys.executable) -> tuple[str, list[str]] | None:
    """``(module, args)`` for ``python [-P|-u|-B|-E|-s ...] -m module args``, else None."""
    if not argv or argv[0] != python:
        return None
    i = 1
    while i < len(argv) and argv[i] in _INTERPRETER_FLAGS:
        i += 1
    if i + 1 >= len(argv) or argv[i] != "-m":
        return None
    return argv[i + 1], list(argv[i + 2 :])


# ---------------------------------------------------------------------------- launcher side


class ZygoteChild:
    """A process forked by the zygote, with the part of ``subprocess.Popen`` the supervisor
    uses: ``pid``, ``stdout``, ``poll()`` and ``wait()``."""

    def __init__(self, argv: Sequence[str], pid: int, stdout: IO[bytes]) -> None:
        self.args = list(argv)
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._exited = threading.Event()

    def _exit(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode


class Zygote:
    """The launcher's handle on one zygote process (started on first use)."""

    def __init__(self, python: str = sys.executable, env: Mapping[str, str] | None = None) -> None:
        self.python = python
        self.env = dict(os.environ if env is None else env)
        # torch_sparse and torch_scatter ask whether CUDA is there when imported: through NVML,
        # the zygote leaves the CUDA driver uninitialized (a child could not use it after the
        # fork); each child runs with its own environment.
        self.env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._state = threading.Lock()
        self._pids: queue.Queue[int | None] = queue.Queue()
        self._children: dict[int, ZygoteChild] = {}
        self._early_exits: dict[int, int] = {}
        self._lost = False

    def serves(self, argv: Sequence[str], env: Mapping[str, str]) -> bool:
        """Whether a process of this argv and env may be forked from this zygote: a
        ``python -m`` of the same interpreter and import path, with no GPU."""
        if module_of(argv, self.python) is None:
            return False
        if env.get("CUDA_VISIBLE_DEVICES", "") != "":
            return False
        return env.get("PYTHONPATH", "") == self.env.get("PYTHONPATH", "") and not self._lost

    def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> ZygoteChild:
        """Fork ``argv`` (see :meth:`serves`); its stdout and stderr go to the returned
        child's ``stdout`` pipe."""
        parsed = module_of(argv, self.python)
        if parsed is None:
            raise ValueError(f"not a 'python -m' command: {list(argv)}")
        module, args = parsed
        with self._lock:
            sock = self._ensure()
            read_end, write_end = os.pipe()
            request = {"module": module, "args": args, "env": dict(env), "cwd": str(cwd)}
            try:
                socket.send_fds(sock, [json.dumps(request).encode()], [write_end])
            finally:
                os.close(write_end)
            pid = self._pids.get()
            if pid is None:
                os.close(read_end)
                raise RuntimeError("the process launcher (zygote) exited; see its stderr")
            child = ZygoteChild(argv, pid, open(read_end, "rb"))  # noqa: SIM115
            with self._state:
                self._children[pid] = child
                if pid in self._early_exits:
                    child._exit(self._early_exits.pop(pid))
            return child

    def _ensure(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._proc = subprocess.Popen(
            [self.python, "-P", "-m", __name__, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=self.env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # the terminal's Ctrl-C reaches distgnn run alone
        )
        theirs.close()
        with self._state:
            self._sock = ours
        threading.Thread(target=self._read, args=(ours,), name="zygote", daemon=True).start()
        return ours

    def _read(self, sock: socket.socket) -> None:
        while True:
            try:
                raw = sock.recv(_MAX_MESSAGE)
            except OSError:
                raw = b""
            if not raw:
                break
            message = json.loads(raw)
            if "pid" in message:
                self._pids.put(int(message["pid"]))
            elif "exit" in message:
                pid, code = int(message["exit"]), int(message["code"])
                with self._state:
                    child = self._children.pop(pid, None)
                    if child is None:
                        self._early_exits[pid] = code
                if child is not None:
                    child._exit(code)
        with self._state:
            if self._sock is not sock:
                return  # closed by close()
            # The zygote died: nobody can reap its children now. Stop them, and report them
            # as killed, so that the supervisor does not wait forever.
            self._lost = True
            orphans = list(self._children.values())
            self._children.clear()
        self._pids.put(None)
        for child in orphans:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            child._exit(-signal.SIGKILL)

    def close(self) -> None:
        """Let the zygote exit (its children run on until the supervisor stops them)."""
        with self._lock:
            with self._state:
                sock, self._sock = self._sock, None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                self._proc = None


# ---------------------------------------------------------------------------- zygote side


def serve(sock: socket.socket, preload: Sequence[str] = PRELOAD) -> None:
    """Import ``preload``, then fork one child per request until the launcher hangs up."""
    for name in preload:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj is sock:
                message, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 1)
                if not message:
                    return
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(json.loads(message), fds, [sock.fileno(), wake_r, wake_w])
                for fd in fds:
                    os.close(fd)
                sock.send(json.dumps({"pid": pid}).encode())
            else:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 512):
                        pass
            _reap(sock)


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = os.waitstatus_to_exitcode(status)
        sock.send(json.dumps({"exit": pid, "code": code}).encode())


def _child(request: dict[str, Any], fds: list[int], close: list[int]) -> None:
    """In the forked child: become the process ``python -m module args`` would be."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in close:
            os.close(fd)
        os.setsid()
        (out,) = fds
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(stdin)
        os.close(out)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), write_through=True, errors="backslashreplace"
        )
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _apply_threads(os.environ)
        sys.argv = [request["module"], *request["args"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        if exit_.code is None:
            code = 0
        elif isinstance(exit_.code, int):
            code = exit_.code
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _apply_threads(env: Mapping[str, str]) -> None:
    """OpenMP read the zygote's environment when torch was imported: give this child the
    thread count its own environment asks for."""
    raw = env.get("OMP_NUM_THREADS", "")
    torch = sys.modules.get("torch")
    if torch is not None and raw.isdigit() and int(raw) > 0:
        torch.set_num_threads(int(raw))


def main(argv: Sequence[str]) -> None:
    (fd,) = argv
    with socket.socket(fileno=int(fd)) as sock:
        serve(sock)


if __name__ == "__main__":
    main(sys.argv[1:])
