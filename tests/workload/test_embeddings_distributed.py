"""Sharded embeddings over two real processes (gloo) against one ``nn.Embedding``.

The ranks (``tests/support/embedding_ranks.py``) run once for the module; each test checks
one property of what they saved: the rows and moments equal those of
``nn.Embedding(sparse=True)`` + ``torch.optim.SparseAdam`` trained on the same lookups and the
sum of the ranks' losses; untouched rows never change; the ids, rows and gradients each rank
sent are exactly those of the distinct rows its lookups touched, recounted from the lookups;
bf16 rows; an out-of-range id fails every rank; resume is bit-exact, and one process
resumes the two ranks' checkpoint (resharded) and trains on where they left off.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import embedding_ranks as er

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[er.Saved]:
    tmp: Path = tmp_path_factory.mktemp("embeddings")
    return er.run_ranks(tmp, "cpu")


def test_sharded_adam_trains_like_one_sparse_embedding(ranks: list[er.Saved]) -> None:
    er.check_trains_like_one_sparse_embedding(ranks)


def test_untouched_rows_keep_their_initial_values(ranks: list[er.Saved]) -> None:
    er.check_untouched_rows_keep_their_initial_values(ranks)


def test_only_touched_rows_are_sent_read_and_updated(ranks: list[er.Saved]) -> None:
    er.check_only_touched_rows_are_sent_read_and_updated(ranks)


def test_bf16_rows_are_the_rounded_master_rows_at_half_the_bytes(
    ranks: list[er.Saved],
) -> None:
    er.check_bf16_rows(ranks)


def test_an_out_of_range_id_fails_every_rank_naming_the_type(ranks: list[er.Saved]) -> None:
    er.check_range_error(ranks)


def test_resume_from_a_checkpoint_is_bit_exact(ranks: list[er.Saved]) -> None:
    er.check_resume_is_bit_exact(ranks)


def test_one_process_resumes_a_two_rank_checkpoint(ranks: list[er.Saved]) -> None:
    er.check_one_process_resumes_the_two_ranks_checkpoint(ranks)
