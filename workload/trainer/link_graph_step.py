"""The link-prediction training step as one CUDA graph replay, over fixed-shape inputs.

A link batch of ``P`` positives (of at most ``B``) seeds ``P * (2 + 2K)`` rows (``uniform``
negatives; ``P * (2 + K)`` for ``corruptDestination``) in the order of
:class:`~distgnn_workload.sampling.seed_edges.LinkLayout`; the pipeline pads its hops to
the :class:`~distgnn_workload.sampling.StaticLayout` of a full batch's seed rows, as for
nodes. The rows of the pairs to score depend on ``P`` only through offsets (``dst`` rows
start at ``P``, negatives at ``2P``), so they are computed inside the graph from ``P`` as a
device scalar: encoder, decoder over ``B`` positive and ``B*K`` negative pairs, the binary
cross-entropy over the real ones (padding pairs masked out) and the backward are captured
once and replayed (:class:`~distgnn_workload.trainer.captured_step.CapturedStep`: warm-up,
capture, the ranks' agreement, one flat all-reduce). The negatives themselves are drawn by
the sampler on the device of its graph, before the subgraph is sampled around them.
"""

from __future__ import annotations

from typing import Unpack

import torch
import torch.nn.functional as F
from torch import Tensor

from distgnn_workload.loader import MiniBatch
from distgnn_workload.models.link import LinkModel
from distgnn_workload.models.sage import GraphSAGE
from distgnn_workload.sampling import StaticLayout
from distgnn_workload.sampling.seed_edges import LinkLayout
from distgnn_workload.trainer.captured_step import StepOptions
from distgnn_workload.trainer.graph_step import PaddedStep


class LinkGraphStep(PaddedStep):
    """The link step of a :class:`LinkModel` with a GraphSAGE encoder over ``layout``
    (its ``batch_size``: the seed rows of a full batch)."""

    def __init__(
        self,
        model: LinkModel,
        optimizer: torch.optim.Optimizer,
        layout: StaticLayout,
        *,
        num_features: int,
        input_dtype: torch.dtype,
        **options: Unpack[StepOptions],
    ) -> None:
        if not isinstance(model.encoder, GraphSAGE):
            raise TypeError("fixed-shape link steps need a GraphSAGE encoder")
        per = LinkLayout.seeds_per_positive(model.negatives, model.kind)
        if layout.batch_size % per:
            raise ValueError(
                f"a layout of {layout.batch_size} seed rows is no whole batch of {per} rows "
                "per positive"
            )
        super().__init__(
            model, optimizer, layout, num_features=num_features, input_dtype=input_dtype, **options
        )
        self.link = model
        self.encoder = model.encoder
        self.per_positive = per
        device = options["device"]
        b, k = layout.batch_size // per, model.negatives
        self.positives = torch.zeros((), dtype=torch.int64, device=device)
        self.pos_rows = torch.arange(b, device=device)
        self.neg_rows = torch.arange(b * k, device=device)
        self.neg_of = self.pos_rows.repeat_interleave(k)  # the positive of each negative
        self.corrupt = LinkLayout(b, k, model.kind).corrupt
        self.negatives = k

    def _load(self, batch: MiniBatch) -> None:
        static = self._load_padded(batch)
        if static.num_seeds % self.per_positive:
            raise ValueError(
                f"{static.num_seeds} seed rows are no batch of {self.per_positive} rows per "
                "positive"
            )
        self.positives.fill_(static.num_seeds // self.per_positive)

    def pair_rows(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Rows of ``(pos src, pos dst, neg src, neg dst)`` for ``B`` positives and ``B*K``
        negatives; those of padding pairs (past the batch's ``P``) stay within the padded
        seeds and are masked out of the loss."""
        p, k = self.positives, self.negatives
        pos_src = self.pos_rows
        pos_dst = self.pos_rows + p
        if self.corrupt:
            return pos_src, pos_dst, self.neg_of, self.neg_rows + 2 * p
        neg_src = self.neg_rows + 2 * p
        return pos_src, pos_dst, neg_src, neg_src + p * k

    def _loss(self) -> Tensor:
        """Mean binary cross-entropy over the real positives (1) and negatives (0)."""
        pos_src, pos_dst, neg_src, neg_dst = self.pair_rows()
        with self._autocast():
            z = self.encoder.forward_static(self.x, self.hops)
            pos = self.link.decoder(z[pos_src], z[pos_dst])
            neg = self.link.decoder(z[neg_src], z[neg_dst])
        p = self.positives
        pos_loss = F.binary_cross_entropy_with_logits(
            pos.float(), torch.ones_like(pos, dtype=torch.float32), reduction="none"
        )
        neg_loss = F.binary_cross_entropy_with_logits(
            neg.float(), torch.zeros_like(neg, dtype=torch.float32), reduction="none"
        )
        zero = pos_loss.new_zeros(())
        total = (
            torch.where(self.pos_rows < p, pos_loss, zero).sum()
            + torch.where(self.neg_rows < p * self.negatives, neg_loss, zero).sum()
        )
        return total / (p * (1 + self.negatives)).clamp(min=1).to(total.dtype)
