"""Distributed layer-wise inference: two real processes (gloo) over a real partition store
give the logits and accuracies of a single-process full-graph forward of the same weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from distgnn_operator.local.ports import free_ports
from tests.support.layerwise import ARCHS, full_graph_logits, model_of, write_store
from tests.support.layerwise_peers import WORLD_SIZE, evaluate_rank


def test_two_processes_equal_the_single_process_full_graph_forward(tmp_path: Path) -> None:
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
    mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
        evaluate_rank,
        args=(free_ports(1)[0], str(store.path), str(out)),
        nprocs=WORLD_SIZE,
        start_method="spawn",
    )
    graph = store.to_graph()
    labels = np.asarray(graph.y)
    for arch in ARCHS:
        got = [torch.load(out / f"{arch}-{r}.pt") for r in range(WORLD_SIZE)]
        shares = [g["share"] for g in got]
        assert shares[0][0] == 0
        assert shares[0][1] == shares[1][0]
        assert shares[1][1] == store.meta.num_nodes
        # the first share is the shorter: the exchange pads it, and rank 1's rows move
        assert shares[0][1] - shares[0][0] < shares[1][1] - shares[1][0]
        logits = torch.cat([g["logits"] for g in got])
        want = full_graph_logits(models[arch], store)
        assert float(want.abs().max()) > 0.1
        torch.testing.assert_close(logits, want, rtol=1e-5, atol=1e-5)
        hit = want.argmax(-1).numpy() == labels
        for split, mask in (("val", graph.val_mask), ("test", graph.test_mask)):
            expected = float(hit[np.asarray(mask)].mean())
            for g in got:  # every rank holds the summed figure
                assert g["accuracy"][split] == pytest.approx(expected), (arch, split)
