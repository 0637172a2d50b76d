"""CPU seconds per test, beside pytest's wall-clock ``--durations``.

On a machine of few cores the suite is bound by CPU, not by waiting: a test that starts
processes importing torch costs seconds of CPU that every other worker waits for. This
plugin charges each test with the user and system time of the pytest process and of its
child processes (setup, call and teardown together). A child that is still running counts
as it goes, with the children it reaped itself (read from /proc): the ranks a forkserver
started, the roles a zygote forked, a session fixture's daemons. Counted only when reaped,
they would be charged all at once to whichever later test happened to reap their parent.
``--cpu-durations=N`` lists the N costliest tests at the end,
with the total; it works under pytest-xdist (the figures travel in the reports).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Generator
from pathlib import Path

import pytest

_KEY = "cpu_seconds"
_START = pytest.StashKey[float]()


_TICKS = os.sysconf("SC_CLK_TCK")


def _live_children_cpu() -> float:
    """User and system seconds of this process's live children, each with the children it
    reaped (utime, stime, cutime, cstime of /proc/PID/stat)."""
    ticks = 0
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # reaped meanwhile: RUSAGE_CHILDREN has it now
            # fields[0] is the state (stat's 3rd field): utime..cstime are stat's 14th..17th
            ticks += sum(int(f) for f in fields[11:15])
    return ticks / _TICKS


def _cpu_now() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return reaped + _live_children_cpu()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-durations",
        type=int,
        default=0,
        metavar="N",
        help="list the N tests that used the most CPU seconds (their own and their children's)",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    item.stash[_START] = _cpu_now()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    start = item.stash.get(_START, None)
    if start is not None:
        now = _cpu_now()
        report.user_properties.append((_KEY, round(now - start, 3)))
        item.stash[_START] = now
    return report


class CpuSummary:
    def __init__(self) -> None:
        self.per_test: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == _KEY and isinstance(value, float | int):
                self.per_test[report.nodeid] = self.per_test.get(report.nodeid, 0.0) + value

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        count = terminalreporter.config.getoption("cpu_durations")
        if not self.per_test:
            return
        ranked = sorted(self.per_test.items(), key=lambda kv: kv[1], reverse=True)
        total = sum(self.per_test.values())
        terminalreporter.write_sep("=", f"{count} most CPU-costly tests (user + system)")
        for nodeid, seconds in ranked[:count]:
            terminalreporter.write_line(f"{seconds:9.2f}s cpu  {nodeid}")
        terminalreporter.write_line(f"{total:9.1f}s cpu in all, over {len(self.per_test)} tests")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("cpu_durations") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(CpuSummary(), "distgnn-cpu-summary")
