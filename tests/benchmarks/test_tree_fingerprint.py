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


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, timeout=60
    )
    return out.stdout.strip()


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
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    script = bench / "tree_fingerprint.sh"
    at_head = _fingerprint("HEAD", script=script)
    assert at_head == _fingerprint(script=script) == _fingerprint("--dir", str(repo))
    (repo / "workload" / "c.py").write_text("C = 1\n")
    # the checkout moved on, the commit did not
    assert _fingerprint(script=script) != _fingerprint("HEAD", script=script) == at_head


def test_tree_copy_makes_a_folder_of_a_revision_with_todays_benchmarks(tmp_path: Path) -> None:
    """``benchmarks/tree_copy.sh``: the before trees of a device call, by revision."""
    repo = _tree(
        tmp_path / "repo",
        {
            "api/a.py": "A = 1\n",
            "operator/b.py": "B = 2\n",
            "workload/c.py": "C = 3\n",
            "setup.py": "\n",
            "pyproject.toml": "\n",
            "benchmarks/x/results/old.jsonl": "{}\n",
            "benchmarks/x/bench.py": "OLD = 1\n",
        },
    )
    for script in ("tree_copy.sh", "tree_fingerprint.sh"):
        (repo / "benchmarks" / script).write_text((REPO / "benchmarks" / script).read_text())
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "workload" / "c.py").write_text("C = 4\n")  # the checkout moves on
    (repo / "benchmarks" / "x" / "bench.py").write_text("NEW = 1\n")
    copy = repo / "benchmarks" / "tree_copy.sh"
    out = subprocess.run(
        ["bash", str(copy), f".old={first}"], check=True, capture_output=True, text=True
    ).stdout.split()
    assert out == [
        ".old",
        first,
        _fingerprint(first, script=repo / "benchmarks/tree_fingerprint.sh"),
    ]
    old = repo / ".old"
    assert (old / "workload" / "c.py").read_text() == "C = 3\n"  # the revision's code
    assert (old / "benchmarks" / "x" / "bench.py").read_text() == "NEW = 1\n"  # today's bench
    assert not (old / "benchmarks" / "x" / "results").exists()
    for bad, why in (("old", "FOLDER=REV"), (".a/b=HEAD", "FOLDER=REV"), (".n=nope", "nope")):
        failed = subprocess.run(["bash", str(copy), bad], capture_output=True, text=True)
        assert failed.returncode == 2
        assert why in failed.stderr
