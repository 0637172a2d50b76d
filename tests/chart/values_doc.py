"""Reads the documented keys of the chart's values.yaml (helm-docs style ``# --`` comments).

A key is documented when the comment block right above it starts with ``# --``; the block is
its description. The chart tests use this to check values.yaml against the README and the
schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CHART_DIR = Path(__file__).resolve().parents[2] / "charts" / "distgnn"

_KEY_RE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_]*):(?:\s|$)")


@dataclass(frozen=True)
class DocumentedValue:
    """One documented key of values.yaml."""

    path: str
    description: str
    default: Any

    def default_text(self) -> str:
        """The default as the README table writes it: compact JSON."""
        return json.dumps(self.default, separators=(", ", ": "))


def load_values(chart_dir: Path = CHART_DIR) -> dict[str, Any]:
    """values.yaml as data."""
    data = yaml.safe_load((chart_dir / "values.yaml").read_text())
    assert isinstance(data, dict)
    return data


def lookup(values: dict[str, Any], path: str) -> Any:
    """The value at a dotted key path."""
    node: Any = values
    for part in path.split("."):
        node = node[part]
    return node


def documented_values(chart_dir: Path = CHART_DIR) -> list[DocumentedValue]:
    """Every key with a ``# --`` comment, in file order."""
    values = load_values(chart_dir)
    stack: list[tuple[int, str]] = []
    comment: list[str] = []
    out: list[DocumentedValue] = []
    for line in (chart_dir / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        match = _KEY_RE.match(line)
        if not match:
            if not stripped:
                comment = []
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        path = ".".join(k for _, k in stack)
        if comment and comment[0].startswith("--"):
            text = " ".join([comment[0].removeprefix("--").strip(), *comment[1:]]).strip()
            out.append(DocumentedValue(path, text, lookup(values, path)))
        comment = []
    return out


def leaf_paths(node: Any, prefix: str = "") -> list[str]:
    """Dotted paths of every leaf of values.yaml (empty maps and lists count as leaves)."""
    if isinstance(node, dict) and node:
        out: list[str] = []
        for key, value in node.items():
            out.extend(leaf_paths(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return [prefix]


def readme_table(chart_dir: Path = CHART_DIR) -> str:
    """The values table that the README must hold, generated from values.yaml."""
    rows = ["| Key | Default | Description |", "| --- | --- | --- |"]
    for value in documented_values(chart_dir):
        default = value.default_text().replace("|", "\\|")
        rows.append(f"| `{value.path}` | `{default}` | {value.description} |")
    return "\n".join(rows)
