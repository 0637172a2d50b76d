"""The README's commands work; every path, Python file and link the docs name exists.

Every command in the README's ``bash`` blocks is classified by its first words: the quick,
local ones (no cluster, GPU or network) run here; the others are named in ``SKIPPED`` with the
tier that covers them. A command of a new kind fails until it is classified.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.local.cli_command import distgnn_cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))

# Commands that run here, in seconds, with no cluster, GPU or network.
RUN: frozenset[tuple[str, ...]] = frozenset(
    {
        ("distgnn", "validate"),
        ("distgnn", "plan"),
        ("distgnn", "render"),
        ("distgnn", "crd"),
    }
)
# Commands the README shows that this test leaves out, and what covers them instead.
SKIPPED: dict[tuple[str, ...], str] = {
    ("pip", "install"): "installs packages over the network",
    ("bash", "scripts/test.sh"): "runs the suite this test is part of",
    ("distgnn", "run"): "the e2e tier runs the quickstart (tests/local/test_run_e2e.py)",
    ("kubectl",): "needs a cluster: the integration tier applies jobs to a real control plane",
    ("helm",): "needs a cluster: the integration tier installs the chart (test_chart_install.py)",
}
# Top-level folders whose paths the docs name, checked to exist.
PATH_ROOTS = (
    "manifests", "docs", "charts", "benchmarks", "hack", "tests", "scripts", "docker",
    "api", "operator", "workload",
)  # fmt: skip
SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})


def bash_commands(markdown: str) -> list[str]:
    """The command lines of the ``bash`` blocks, with backslash continuations joined."""
    lines: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL):
        for line in re.sub(r"\s*\\\n\s*", " ", block).splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append(line.strip())
    return lines


def segments(line: str) -> list[list[str]]:
    """The simple commands of a line: its words split at ``&&``, ``|``, ``;`` and the like."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    out: list[list[str]] = [[]]
    for word in lexer:
        if word in SEPARATORS:
            out.append([])
        else:
            out[-1].append(word)
    return [words for words in out if words]


def kind(words: list[str]) -> tuple[str, ...] | None:
    """The longest classified prefix of a command's words."""
    for n in range(len(words), 0, -1):
        prefix = tuple(words[:n])
        if prefix in RUN or prefix in SKIPPED:
            return prefix
    return None


def classify(line: str) -> tuple[bool, list[str]]:
    """Whether the line runs here, and its unclassified commands."""
    kinds = [(words, kind(words)) for words in segments(line)]
    unknown = [" ".join(words) for words, k in kinds if k is None]
    return all(k in RUN for _, k in kinds), unknown


README_LINES = bash_commands(README.read_text())
RUNNABLE = [line for line in README_LINES if classify(line)[0]]


def test_every_readme_command_is_classified() -> None:
    unknown = [cmd for line in README_LINES for cmd in classify(line)[1]]
    assert not unknown, (
        f"README commands of no known kind: {unknown}; add their first words to RUN in "
        f"{Path(__file__).name} if they run here quickly without a cluster, GPU or network, "
        "else to SKIPPED with the tier that covers them"
    )
    shown = {kind(words) for line in README_LINES for words in segments(line)}
    assert {("distgnn", "validate"), ("distgnn", "plan"), ("distgnn", "render")} <= shown, (
        "the README's tour shows distgnn validate, plan and render"
    )


@pytest.mark.parametrize("line", RUNNABLE, ids=lambda line: line[:60])
def test_readme_command_runs(line: str, tmp_path: Path) -> None:
    """The command exits 0 and prints something, with this environment's distgnn."""
    cli = " ".join(shlex.quote(part) for part in distgnn_cli())
    script = f'set -euo pipefail\ndistgnn() {{ {cli} "$@"; }}\n{line}\n'
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTGNN_")}
    env["HOME"] = str(tmp_path)  # nothing it writes lands in the real home
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{line}\nexit {result.returncode}\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), f"{line} printed nothing"


def _heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", markdown, re.MULTILINE):
        text = heading.lower().replace("`", "")
        anchors.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text)))
    return anchors


def _without_code_fences(markdown: str) -> str:
    return re.sub(r"^```.*?^```", "", markdown, flags=re.MULTILINE | re.DOTALL)


DOC_FILES = [README, *DOCS]


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_paths_exist(doc: Path) -> None:
    """Every repository path the file names (``manifests/...``, ``docs/...`` and the other
    top-level folders) exists; a glob matches something; placeholders (``<uid>``) are left."""
    text = doc.read_text()
    pattern = rf"(?<![\w./$-])((?:{'|'.join(PATH_ROOTS)})/[\w./*<>-]*)"
    missing = []
    for path in set(re.findall(pattern, text)):
        path = path.rstrip(".")
        if "<" in path or ">" in path:
            continue
        if "*" in path:
            if not glob.glob(str(ROOT / path)):
                missing.append(path)
        elif not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {sorted(missing)}"


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_python_modules_exist(doc: Path) -> None:
    """Every Python file the file names in backticks exists: a path from the root, or the
    tail of one inside a package (``reconcile/observe.py`` in operator/), as the code map
    writes them."""
    roots = [ROOT / root for root in PATH_ROOTS]
    files = {p.relative_to(ROOT).as_posix() for root in roots for p in root.rglob("*.py")}
    files |= {p.name for p in ROOT.glob("*.py")}
    missing = [
        name
        for name in set(re.findall(r"`([\w/.-]+\.py)`", doc.read_text()))
        if name not in files and not any(f.endswith("/" + name) for f in files)
    ]
    assert not missing, f"{doc.relative_to(ROOT)} names Python files that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    """Every relative link leads to a file, and its #anchor to a heading of that file."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _without_code_fences(doc.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(target)
            continue
        if anchor and dest.suffix == ".md" and anchor not in _heading_anchors(dest.read_text()):
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)} has broken links: {broken}"


def test_docs_are_linked_from_the_readme() -> None:
    """A newcomer finds every doc from the README."""
    readme = README.read_text()
    unlinked = [p.name for p in DOCS if f"(docs/{p.name}" not in readme]
    assert not unlinked, f"README.md links none of {unlinked}"
