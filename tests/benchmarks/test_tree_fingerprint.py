"""``benchmarks/tree_fingerprint.sh``: the name of the code a device run used, by content."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "tree_fingerprint.sh"


def _fingerprint(*args: str, script: Path = SCRIPT) -> str:
    out = subprocess.run(
        ["bash", str(script), *args], check=True, capture_output=True, text=True, timeout=60
    )
    return out.stdout.strip()


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_fingerprint_follows_the_code_files_names_and_contents(tmp_path: Path) -> None:
    files = {"api/a.py": "A = 1\n", "operator/b.py": "B = 2\n", "workload/c/d.py": "D = 3\n"}
    first = _fingerprint("--dir", str(_tree(tmp_path / "one", files)))
    assert len(first) == 12
    assert int(first, 16) >= 0  # hex digits
    # the same files elsewhere, plus files that are not code: the same fingerprint
    same = _tree(tmp_path / "two", {**files, "workload/c/notes.md": "x", "README.md": "y"})
    assert _fingerprint("--dir", str(same)) == first
    edited = _tree(tmp_path / "three", {**files, "workload/c/d.py": "D = 4\n"})
    assert _fingerprint("--dir", str(edited)) != first
    moved = dict(files)
    moved["workload/c/e.py"] = moved.pop("workload/c/d.py")
    assert _fingerprint("--dir", str(_tree(tmp_path / "four", moved))) != first


def test_a_commit_and_its_checkout_agree(tmp_path: Path) -> None:
    """A commit's fingerprint is that of its files (here: a repository made for the test)."""
    repo = _tree(
        tmp_path / "repo", {"api/a.py": "A = 1\n", "operator/b.py": "", "workload/c.py": ""}
    )
    bench = repo / "benchmarks"
    bench.mkdir()
    (bench / "tree_fingerprint.sh").write_text(SCRIPT.read_text())

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60)

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    script = bench / "tree_fingerprint.sh"
    at_head = _fingerprint("HEAD", script=script)
    assert at_head == _fingerprint(script=script) == _fingerprint("--dir", str(repo))
    (repo / "workload" / "c.py").write_text("C = 1\n")
    # the checkout moved on, the commit did not
    assert _fingerprint(script=script) != _fingerprint("HEAD", script=script) == at_head
