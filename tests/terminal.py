"""Lines on pytest's terminal that get past output capture: what a test run should show."""

from __future__ import annotations

import pytest


def report(config: pytest.Config, line: str, *, bold: bool = False) -> None:
    """A line on pytest's terminal, past output capture (numbers a test run should show, or
    word of a slow setup step)."""
    capture = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    if capture is None or reporter is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line, bold=bold)
