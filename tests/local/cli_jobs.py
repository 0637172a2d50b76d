"""The job files that the command-line tests give ``distgnn``: the examples and a tiny job."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = sorted((Path(__file__).parents[2] / "manifests" / "examples").glob("*.yaml"))

VALID = """\
apiVersion: distgnn.io/v1alpha1
kind: DistGNNJob
metadata:
  name: tiny
spec:
  dataset:
    synthetic: {numNodes: 1000, numEdges: 5000}
  model: {numLayers: 2, fanout: [5, 5]}
"""
"""A valid job small enough to plan and run on a laptop."""


def write_job(tmp_path: Path, text: str) -> Path:
    """``text`` as ``job.yaml`` under ``tmp_path``."""
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path
