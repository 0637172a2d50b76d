"""benchmarks/accuracy/synthetic_calibration.py at toy scale: every model trains and reports
its accuracies, and the graph's own features are what an MLP learns from. No timing, and no
claim about the calibration itself (that needs the scale of its README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.scripts import load_script

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(300)]

SCRIPT = (
    Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "synthetic_calibration.py"
)


def test_each_model_reports_its_accuracies_at_each_point(tmp_path: Path) -> None:
    calibration = load_script(SCRIPT, "synthetic_calibration", beside=True)
    out = tmp_path / "cal.jsonl"
    argv = ["--nodes", "1500", "--homophily", "0.8", "--noise", "1.0", "4.0"]
    argv += ["--models", "mlp", "sign", "sage", "--steps", "20", "--batch-size", "64"]
    argv += ["--eval-every", "10", "--train-fraction", "0.3", "--out", str(out)]
    assert calibration.main(argv) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["feature_noise"], r["model"]) for r in records] == [
        (noise, model) for noise in (1.0, 4.0) for model in ("mlp", "sign", "sage")
    ]
    for r in records:
        assert r["nodes"] == 1500
        assert r["homophily"] == 0.8
        # products' density: 25.26 undirected edges per node, stored both ways
        assert r["directed_edges"] == 2 * round(1500 * 61_859_140 / 2_449_029)
        assert r["train_nodes"] == 450
        assert [step for step, _ in r["test_curve"]] == [10, 20]
        assert r["best_step"] in (10, 20)
        assert 0.0 <= r["test_accuracy"] <= 1.0
    by = {(r["feature_noise"], r["model"]): r["final_test_accuracy"] for r in records}
    # at noise 1 a node's own features tell its class better than at noise 4 (near chance)
    assert by[(1.0, "mlp")] > by[(4.0, "mlp")]
