"""What the workload reports back: result.json, the partition Job's figures, and the progress
events it prints on stdout for ``distgnn run``'s bars and for logs."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from distgnn_api.spec import EvaluationKind, Model

PROGRESS_PATH = "/progress"  # HTTP path on the metrics port serving Progress JSON
PROGRESS_LINE_PREFIX = "@@distgnn "  # stdout lines that carry a ProgressEvent

# ProgressEvent stages that `distgnn run` draws as bars. An event whose metrics carry
# "epoch" (and "epochs") gets a bar of its own per epoch. Figures shown beside a bar when
# present: seeds_per_second, loss, accuracy, val_accuracy, test_accuracy.
STAGE_GENERATE = "generate"  # synthetic graph generation (partition Job)
STAGE_LOAD = "load"  # reading a dataset from the volume (partition Job)
STAGE_PARTITION = "partition"  # partitioning and writing the store (partition Job)
STAGE_EPOCH = "epoch"  # one training epoch, done/total in batches (trainer 0)
STAGE_EVAL = "eval"  # validation or test evaluation (trainer 0)


class LinkFigures(Model):
    """One split's link-prediction ranking figures (OGB's evaluator: ties count half)."""

    mrr: float
    """Mean reciprocal rank of the positives against their negatives."""
    hits: dict[str, float]
    """Hits@K by K (as a string): the share of positives ranked at most K."""
    positives: int
    """Positives ranked."""

    def summary(self) -> str:
        hits = ", ".join(f"Hits@{k} {v:.4f}" for k, v in self.hits.items())
        return f"MRR {self.mrr:.4f}" + (f", {hits}" if hits else "")


class Result(Model):
    """result.json: written by trainer 0 when training completes."""

    job_uid: str
    """The job run it belongs to."""
    epochs: int
    """Epochs trained."""
    test_accuracy: float | None = None
    """Test accuracy of the final model (node classification; None for link prediction)."""
    test_accuracy_kind: EvaluationKind = EvaluationKind.sampled
    """How test_accuracy was computed: full (full-neighbourhood inference over the whole
    graph) or sampled (mini-batches at the training fanout); ``training.evaluation.test``.
    A result written before the kinds were recorded was sampled."""
    val_accuracy: float | None = None
    """Validation accuracy of the final model."""
    val_accuracy_kind: EvaluationKind | None = None
    """How val_accuracy was computed; ``training.evaluation.validation``."""
    seeds_per_second: float
    """Mean training throughput of the whole job."""
    test_link: LinkFigures | None = None
    """Link prediction: the test edges' ranking figures."""
    val_link: LinkFigures | None = None
    """Link prediction: the validation edges' ranking figures."""
    elapsed_seconds: float
    """Wall time of training, restarts included."""
    finished_at: str
    """RFC 3339 time of completion."""


class PartitionFigures(Model):
    """What the partition Job measured: the JSON it writes as its termination message.

    The operator keeps it on the claim next to the partition marker, so that a job that
    reuses the partition reports the same figures, and exports it as ``distgnn_partition_*``.
    """

    num_partitions: int
    """Partitions written."""
    algorithm: str
    """Partitioner that assigned the nodes (metis or random)."""
    step_seconds: dict[str, float]
    """Wall time of each step: generate or load, partition, write."""
    edge_cut: int
    """Undirected edges whose ends lie in different partitions."""
    edge_cut_fraction: float
    """edge_cut over all undirected edges."""
    balance: dict[str, float]
    """Largest over mean partition, for nodes, train nodes and edges."""


class ProgressEvent(Model):
    """One progress report on stdout, for ``distgnn run``'s progress bars and for logs."""

    stage: str
    """What is progressing: generate, partition, epoch, eval, ..."""
    done: float
    """Units done."""
    total: float | None = None
    """Units in total, when known."""
    metrics: dict[str, float] = {}
    """Figures to show beside the bar, e.g. seeds_per_second, loss, accuracy."""


def emit_progress(
    stage: str,
    done: float,
    total: float | None = None,
    stream: TextIO | None = None,
    **metrics: float,
) -> None:
    """Print a progress event as one line that ``distgnn run`` parses."""
    event = ProgressEvent(stage=stage, done=done, total=total, metrics=metrics)
    out = stream or sys.stdout
    out.write(PROGRESS_LINE_PREFIX + event.model_dump_json() + "\n")
    out.flush()


def parse_progress_line(line: str) -> ProgressEvent | None:
    """The event carried by a stdout line, or None for an ordinary log line."""
    if not line.startswith(PROGRESS_LINE_PREFIX):
        return None
    try:
        return ProgressEvent.model_validate_json(line[len(PROGRESS_LINE_PREFIX) :])
    except ValueError:
        return None


def rfc3339_now() -> str:
    """The current UTC time as Kubernetes writes it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def dump_json(path: str | Path, obj: Model | dict[str, Any]) -> None:
    """Write JSON atomically: a temporary file, fsync, then rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    text = (
        obj.model_dump_json(by_alias=True, indent=2)
        if isinstance(obj, Model)
        else json.dumps(obj, indent=2)
    )
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
