"""The processes of ``test_evaluation_distributed.py`` (a module spawned children import)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist

from distgnn_operator.local.ports import free_ports
from distgnn_workload.data.graph import NODE_TYPE
from distgnn_workload.evaluation import LayerwiseInference, full_neighbourhood_accuracy
from distgnn_workload.evaluation.store_rows import StoreRows
from distgnn_workload.partition import PartitionStore
from distgnn_workload.runtime.ddp import Collectives
from tests.support.layerwise import ARCHS, full_graph_logits, model_of, write_store
from tests.support.ranks import join_group, leave_group, spawn_ranks

WORLD_SIZE = 2


def evaluate_rank(
    rank: int,
    port: int,
    store_path: str,
    out: str,
    cuda: bool = False,
    on_host: bool = False,
    bf16: bool = False,
) -> None:
    """One trainer: join a gloo group (NCCL on GPU ``rank`` with ``cuda``), run layer-wise
    inference of each arch's saved weights over its share, and write its logits and the
    summed accuracies to ``out``. ``on_host`` keeps the gathered layers in host memory."""
    device = join_group(rank, WORLD_SIZE, f"tcp://127.0.0.1:{port}", cuda=cuda)
    finished = False
    try:
        store = PartitionStore.open(store_path)
        # the counts go over a host-side gloo group, as the trainers' Collectives do
        control = dist.new_group(backend="gloo") if cuda else None
        collectives = Collectives(
            rank,
            WORLD_SIZE,
            ["trainer-0", "trainer-1"],
            control if isinstance(control, dist.ProcessGroup) else None,
        )
        for arch in ARCHS:
            model = model_of(arch).to(device)
            model.load_state_dict(torch.load(Path(out) / f"{arch}.weights.pt"))
            # small chunks and exchange pieces: many blocks, many all-gather calls
            engine = LayerwiseInference.of_store(
                store,
                rank=rank,
                world_size=WORLD_SIZE,
                device=device,
                chunk_edges=97,
                chunk_nodes=40,
                exchange_rows=17,
                on_host=on_host,
                bf16=bf16,
            )
            logits = engine.logits(model)
            accuracy = full_neighbourhood_accuracy(
                engine, model, StoreRows(store), ["val", "test"], collectives.all_reduce
            )
            torch.save(
                {"share": engine.share(NODE_TYPE), "logits": logits.cpu(), "accuracy": accuracy},
                Path(out) / f"{arch}-{rank}.pt",
            )
        finished = True
    finally:
        leave_group(finished=finished)


def check_two_ranks(
    tmp_path: Path, *, cuda: bool = False, on_host: bool = False, bf16: bool = False
) -> dict[str, float]:
    """Run :func:`evaluate_rank` in two spawned processes over a 4-partition store and
    check their logits and accuracies against a single-process full-graph forward on the
    CPU. Returns each arch's largest absolute logit difference."""
    store = write_store(tmp_path / "store", 4)
    out = tmp_path / "out"
    out.mkdir()
    models = {}
    for arch in ARCHS:
        model = model_of(arch)
        with torch.no_grad():  # weights unlike the peers' own initialisation
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        torch.save(model.state_dict(), out / f"{arch}.weights.pt")
        models[arch] = model
    spawn_ranks(
        evaluate_rank,
        (free_ports(1)[0], str(store.path), str(out), cuda, on_host, bf16),
        WORLD_SIZE,
    )
    graph = store.to_graph()
    labels = np.asarray(graph.y)
    differences = {}
    for arch in ARCHS:
        got = [torch.load(out / f"{arch}-{r}.pt") for r in range(WORLD_SIZE)]
        shares = [g["share"] for g in got]
        assert shares[0][0] == 0, shares
        assert shares[0][1] == shares[1][0], shares
        assert shares[1][1] == store.meta.num_nodes, shares
        # the first share is the shorter: the exchange pads it, and rank 1's rows move
        assert shares[0][1] - shares[0][0] < shares[1][1] - shares[1][0], shares
        logits = torch.cat([g["logits"] for g in got])
        want = full_graph_logits(models[arch], store)
        assert float(want.abs().max()) > 0.1
        differences[arch] = float((logits - want).abs().max())
        if bf16:
            error = float((logits - want).norm() / want.norm())
            assert error < 3e-2, (arch, error)
            continue
        torch.testing.assert_close(logits, want, rtol=1e-5, atol=1e-4 if cuda else 1e-5)
        hit = want.argmax(-1).numpy() == labels
        for split, mask in (("val", graph.val_mask), ("test", graph.test_mask)):
            expected = float(hit[np.asarray(mask)].mean())
            for g in got:  # every rank holds the summed figure
                assert g["accuracy"][split] == pytest.approx(expected), (arch, split)
    return differences
