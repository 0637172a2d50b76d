"""Link-prediction ranking: OGB's rank formula, and two gloo ranks that give exactly the
figures of one process ranking every positive with the same model and negatives."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distgnn_operator.local.ports import free_ports
from distgnn_workload.evaluation.link_ranking import metrics_of, rank_share, ranks_against
from distgnn_workload.models.link import DotDecoder, LinkModel, link_loss
from distgnn_workload.sampling import HopBatch
from tests.support.layerwise import NUM_NODES, model_of, write_store
from tests.support.link_ranking_peers import HITS_AT, decoder_of, evaluate_rank
from tests.support.ranks import spawn_ranks


def test_rank_is_ogb_mean_of_optimistic_and_pessimistic() -> None:
    pos = torch.tensor([0.5, 0.5, 2.0])
    neg = torch.tensor([[0.1, 0.9, 0.5], [0.5, 0.5, 0.5], [0.0, 1.0, 1.5]])
    # row 0: one above, one tie -> 0.5*(1+2)+1; row 1: three ties -> 0.5*(0+3)+1; row 2: top
    assert ranks_against(pos, neg).tolist() == [2.5, 2.5, 1.0]
    m = metrics_of(torch.tensor([1.0, 2.0, 4.0, 10.0]), [1, 3])
    assert m.mrr == pytest.approx((1 + 0.5 + 0.25 + 0.1) / 4)
    assert m.hits == {1: 0.25, 3: 0.5}


def test_ranking_in_chunks_equals_one_pass() -> None:
    g = torch.Generator().manual_seed(0)
    table = torch.randn(50, 8, generator=g)
    src, dst = torch.randint(0, 50, (30,), generator=g), torch.randint(0, 50, (30,), generator=g)
    neg = torch.randint(0, 50, (30, 20), generator=g)
    embed = table.__getitem__
    whole = rank_share(embed, DotDecoder(), src, dst, neg)
    assert torch.equal(rank_share(embed, DotDecoder(), src, dst, neg, chunk_pairs=50), whole)
    want = ranks_against((table[src] * table[dst]).sum(-1), (table[src, None] * table[neg]).sum(-1))
    assert torch.equal(whole, want)
    # against every node but the positive's own destination
    every = rank_share(embed, DotDecoder(), src, dst, None, 50)
    scores = table[src] @ table.t()
    pos_scores = scores.gather(1, dst[:, None])
    scores.scatter_(1, dst[:, None], -torch.inf)
    assert torch.equal(every, ranks_against(pos_scores.squeeze(1), scores))


def test_link_model_scores_the_layout_rows_and_bce() -> None:
    encoder = model_of("sage", num_layers=1)
    model = LinkModel(encoder, DotDecoder(), negatives=2, kind="corruptDestination")
    # one positive (rows 0, 1) and two negatives (rows 2, 3); no sampled edges
    hop = HopBatch(
        node_ids=torch.arange(4),
        num_seeds=4,
        num_nodes_per_hop=[4, 0],
        num_edges_per_hop=[0],
        edge_index=torch.zeros(2, 0, dtype=torch.int64),
    )
    x = torch.randn(4, 12)
    pos, neg = model(x, hop)
    z = encoder(x, hop)
    assert torch.allclose(pos, (z[0] * z[1]).sum().reshape(1))
    assert torch.allclose(neg, (z[0:1] * z[2:4]).sum(-1))
    want = -(torch.log(torch.sigmoid(pos)).sum() + torch.log(1 - torch.sigmoid(neg)).sum()) / 3
    assert link_loss(pos, neg).item() == pytest.approx(want.item(), rel=1e-5)


@pytest.mark.slow
def test_two_ranks_equal_one_process(tmp_path: Path) -> None:
    store = write_store(tmp_path / "store", 4)
    out = tmp_path / "out"
    out.mkdir()
    g = torch.Generator().manual_seed(2)
    count = 101  # uneven shares
    src = torch.randint(0, NUM_NODES, (count,), generator=g)
    dst = torch.randint(0, NUM_NODES, (count,), generator=g)
    torch.save(
        {"src": src, "dst": dst, "dst_neg": torch.randint(0, NUM_NODES, (count, 40), generator=g)},
        out / "split.pt",
    )
    encoder = model_of("sage")
    with torch.no_grad():
        for p in encoder.parameters():
            p.add_(0.05 * torch.randn_like(p))
    torch.save(encoder.state_dict(), out / "encoder.pt")
    for kind in ("dot", "mlp"):
        torch.save(decoder_of(kind).state_dict(), out / f"{kind}.pt")
    evaluate_rank(0, 0, str(store.path), str(out), 1)
    spawn_ranks(evaluate_rank, (free_ports(1)[0], str(store.path), str(out), 2), 2)
    single = torch.load(out / "figures-1-0.pt")
    for rank in range(2):
        assert torch.load(out / f"figures-2-{rank}.pt") == single
    assert len(single) == 4
    for figures in single.values():
        assert figures["count"] == count
        assert 0 < figures["mrr"] < 1, single
        assert set(figures) == {"mrr", "count"} | {f"hits@{k}" for k in HITS_AT}
