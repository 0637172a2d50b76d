"""The edge split itself (pure numpy, dataset ids): held-out pairs never reach the topology
in either direction, duplicates count once, the caps and the dataset's own negatives apply,
and what cannot work is refused naming the spec field."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from distgnn_api.link import ALL_NEGATIVES_MAX_NODES
from distgnn_api.spec import parse_spec
from distgnn_workload.data import DatasetError
from distgnn_workload.data.host_threads import ENV_THREADS
from distgnn_workload.data.link_data import GivenEdges, LinkData
from distgnn_workload.partition import link_edges
from distgnn_workload.partition.link_edges import pair_keys, split_edges


def _lp(**section: Any) -> Any:
    spec = parse_spec(
        {"dataset": {"ogb": {"path": "d"}}, "task": "linkPrediction", "linkPrediction": section}
    )
    return spec.link_prediction


def _data(n: int = 200, e: int = 1500, seed: int = 0) -> LinkData:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, e)
    dst = rng.integers(0, n, e)
    return LinkData(x=np.zeros((n, 2), dtype=np.float32), src=src, dst=dst)


def test_held_out_pairs_leave_the_topology_in_both_directions() -> None:
    data = _data()
    out = split_edges(data, _lp(split={"valid": 0.1, "test": 0.1}), seed=7)
    n = data.num_nodes
    topo = set(out.topology_keys.tolist())
    for name in ("valid", "test"):
        held = out.split(name)
        assert len(held) > 0
        assert not topo & set(pair_keys(held.src, held.dst, n).tolist())
        assert not topo & set(pair_keys(held.dst, held.src, n).tolist())
    train_keys = pair_keys(out.train.src, out.train.dst, n)
    assert set(train_keys.tolist()) == topo
    assert len(np.unique(train_keys)) == len(train_keys)
    # Every distinct non-loop pair of the input is in exactly one split.
    loops = data.src == data.dst
    distinct = set(pair_keys(data.src[~loops], data.dst[~loops], n).tolist())
    sizes = len(out.train) + len(out.valid) + len(out.test)
    assert sizes == len(distinct)
    assert out.info["duplicate_or_self_loop_edges_dropped"] == len(data.src) - len(distinct)


def test_the_split_and_negatives_follow_the_seed() -> None:
    lp = _lp(evaluation={"negatives": 20, "hitsAt": [1]})
    a, b = split_edges(_data(), lp, 1), split_edges(_data(), lp, 1)
    c = split_edges(_data(), lp, 2)
    assert a.valid.dst_neg is not None
    assert b.valid.dst_neg is not None
    assert c.valid.dst_neg is not None
    assert np.array_equal(a.valid.src, b.valid.src)
    assert np.array_equal(a.valid.dst_neg, b.valid.dst_neg)
    assert a.valid.dst_neg.shape == (len(a.valid), 20)
    assert not np.array_equal(a.valid.dst_neg, c.valid.dst_neg)


def test_max_positives_caps_evaluation_but_keeps_the_rest_held_out() -> None:
    data = _data()
    out = split_edges(data, _lp(evaluation={"maxPositives": 10}), seed=0)
    assert len(out.valid) == len(out.test) == 10
    assert out.info["held_out_pairs"] > 20
    assert len(out.topology_keys) == len(out.train)


def test_from_dataset_uses_its_negatives_and_drops_leaked_training_pairs() -> None:
    data = _data()
    valid = GivenEdges(data.src[:5], data.dst[:5], np.arange(50).reshape(5, 10) % 200)
    test = GivenEdges(data.src[5:9], data.dst[5:9], np.zeros((4, 10), dtype=np.int64))
    data.given = {"valid": valid, "test": test}
    lp = _lp(split={"fromDataset": True}, evaluation={"negatives": 4, "hitsAt": [1]})
    out = split_edges(data, lp, seed=0)
    assert out.valid.dst_neg is not None
    assert np.array_equal(out.valid.dst_neg, valid.dst_neg[:, :4])  # type: ignore[index]
    # The edge list held the held-out pairs: they left training and the topology.
    assert out.info["train_positives_also_held_out_dropped"] >= 9
    with pytest.raises(DatasetError, match="valid split has 10 negatives per positive"):
        split_edges(data, _lp(split={"fromDataset": True}), seed=0)


def test_what_cannot_work_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DatasetError, match=r"spec\.linkPrediction\.split\.fromDataset"):
        split_edges(_data(), _lp(split={"fromDataset": True}), seed=0)
    with pytest.raises(DatasetError, match=r"spec\.linkPrediction\.split: 3 distinct edges"):
        split_edges(_data(n=3, e=3, seed=1), _lp(), seed=0)
    # Positives x negatives beyond the store's limit (lowered here to keep the graph small).
    monkeypatch.setattr(link_edges, "MAX_NEGATIVE_ENTRIES", 1000)
    with pytest.raises(DatasetError, match=r"evaluation\.maxPositives: the valid split has 7[0-9]"):
        split_edges(_data(), _lp(evaluation={"negatives": 100, "hitsAt": [1]}), seed=0)
    big = LinkData(
        x=np.zeros((ALL_NEGATIVES_MAX_NODES + 1, 1), dtype=np.float32),
        src=np.array([0, 1, 2]),
        dst=np.array([1, 2, 3]),
    )
    with pytest.raises(DatasetError, match=r"spec\.linkPrediction\.evaluation\.negatives: 'all'"):
        split_edges(big, _lp(evaluation={"negatives": "all", "hitsAt": [1]}), seed=0)


def test_evaluation_negatives_do_not_depend_on_the_number_of_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seq = np.random.SeedSequence([3, 14])
    rows = 3 * link_edges.NEGATIVE_ROWS + 5
    monkeypatch.setenv(ENV_THREADS, "1")
    one = link_edges.uniform_negatives(seq, 1000, rows, 7)
    monkeypatch.setenv(ENV_THREADS, "4")
    four = link_edges.uniform_negatives(seq, 1000, rows, 7)
    assert one.shape == (rows, 7)
    assert np.array_equal(one, four)
    assert one.min() >= 0
    assert one.max() < 1000
    # blocks draw from their own streams: no block repeats another
    block = link_edges.NEGATIVE_ROWS
    assert not np.array_equal(one[:block], one[block : 2 * block])
