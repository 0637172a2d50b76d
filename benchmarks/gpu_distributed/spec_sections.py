"""The ``model`` and ``training`` sections that every benchmark's job spec builds from its
command line (``--hidden``, ``--fanout``, ``--batch-size``), so that the homogeneous, typed and
link benches and their step-alone runs train the same model the same way."""

from __future__ import annotations

import argparse
from typing import Any

LEARNING_RATE = 0.003


def model_section(
    arch: str, args: argparse.Namespace, *, dropout: float = 0.5, **extra: Any
) -> dict[str, Any]:
    """``arch`` with ``--hidden`` channels and one layer per ``--fanout`` entry."""
    return {
        "arch": arch,
        "hiddenChannels": args.hidden,
        "numLayers": len(args.fanout),
        "fanout": args.fanout,
        "dropout": dropout,
        **extra,
    }


def training_section(
    args: argparse.Namespace,
    *,
    epochs: int,
    bf16: bool,
    learning_rate: float = LEARNING_RATE,
    **extra: Any,
) -> dict[str, Any]:
    """``epochs`` epochs of ``--batch-size`` seeds per trainer; ``extra``: further fields."""
    return {
        "epochs": epochs,
        "batchSize": args.batch_size,
        "learningRate": learning_rate,
        "bf16": bf16,
        **extra,
    }
