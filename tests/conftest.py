"""Suite-wide pytest setup: the gpu skip, and the control-plane fixtures for integration tests.

``control_plane`` (session) is a real etcd + kube-apiserver + kube-controller-manager +
kube-scheduler + kwok on loopback; ``namespace`` (function) is a fresh namespace in it.
A failing test that used them gets the tail of every component's log in its report,
and the log dir is kept.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from tests.support.controlplane import ControlPlane
from tests.support.controlplane_binaries import binaries_built, ensure_binaries
from tests.terminal import report

pytest_plugins = ["tests.support.cpu_time"]

CONTROL_PLANE = pytest.StashKey[ControlPlane]()
CONTROL_PLANE_SUMMARY = pytest.StashKey[str]()


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device (gpu tier)")
        for item in gpu_items:
            item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Build missing control-plane binaries here, before any test runs, so that a cold
    # build is not cut short by a test's timeout.
    if session.config.option.collectonly:
        return
    wanted = any("control_plane" in getattr(i, "fixturenames", ()) for i in session.items)
    if wanted and not binaries_built():
        ensure_binaries(lambda message: report(session.config, message, bold=True))
    if any("kueue_manager" in getattr(i, "fixturenames", ()) for i in session.items):
        from tests.support import kueue

        if not kueue.built():
            report(
                session.config,
                f"Kueue is not built yet: building it now with {kueue.BUILD_SCRIPT} (minutes "
                "cold; cached under ~/.cache/distgnn afterwards)",
                bold=True,
            )
            kueue.build()


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A real Kubernetes control plane with four kwok nodes, shared by the session."""
    config = request.config
    bin_dir = ensure_binaries(lambda message: report(config, message, bold=True))
    plane = ControlPlane.start(bin_dir)
    config.stash[CONTROL_PLANE] = plane
    timings = ", ".join(f"{c.name} {c.ready_after or 0:.1f}s" for c in plane.components)
    summary = (
        f"control plane {plane.version} ready in {plane.startup_seconds:.1f}s ({timings}); "
        f"logs in {plane.log_dir}"
    )
    try:
        yield plane
    finally:
        plane.stop()
        if plane.keep_logs:
            summary += " (kept: a test that used it failed)"
        config.stash[CONTROL_PLANE_SUMMARY] = summary


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace, deleted (without waiting) after the test."""
    control_plane.check_alive()
    name = control_plane.create_namespace(request.node.name)
    yield name
    control_plane.delete_namespace(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and "control_plane" in getattr(item, "fixturenames", ()):
        plane = item.config.stash.get(CONTROL_PLANE, None)
        if plane is not None:
            plane.keep_logs = True
            report.sections.append(
                (f"control-plane logs (kept in {plane.log_dir})", plane.log_tails())
            )
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    summary = terminalreporter.config.stash.get(CONTROL_PLANE_SUMMARY, None)
    if summary:
        terminalreporter.write_line(summary)
