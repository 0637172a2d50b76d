"""A synthetic link-prediction graph shaped like ogbl-citation2, whose links a GNN can learn.

Every node has a latent position: its community's centre plus Gaussian noise
(``LATENT_DIM`` dimensions, ``NUM_COMMUNITIES`` communities at most), and a log-normal
popularity. An edge picks its source in proportion to popularity; with probability
``HOMOPHILY`` its destination candidates come from the source's community, otherwise from
anywhere, again in proportion to popularity; of ``CANDIDATES`` candidates the one whose
latent position is closest in direction to the source's becomes the destination. The
features are a fixed random projection of the latent position plus noise, so an encoder
can recover the latent geometry from a node and its neighbourhood, but only roughly: a
trained GraphSAGE with a dot decoder ranks true destinations well above random ones, yet
far from always first (see tests/workload/test_data_synthetic_link.py for its MRR).

Edges are directed (a citing and a cited node); an undirected pair appears at most once
and there are no self-loops, so the store's undirected topology holds exactly
``num_edges`` pairs. Edges and features are drawn in fixed-size chunks, each from its own
seeded stream, on all the host's cores (numpy releases the GIL in its array work): the same
spec gives the same bytes whatever the number of threads. :data:`GENERATOR_VERSION` names
this way of drawing; the store's content key carries it, so a store of another version is
never reused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from distgnn_api.link import SyntheticLinkDataset
from distgnn_workload.data.csr import chunks
from distgnn_workload.data.distinct_pairs import first_occurrences
from distgnn_workload.data.host_threads import host_threads, run_parallel
from distgnn_workload.data.link_data import LinkData

log = logging.getLogger(__name__)

LATENT_DIM = 16
NUM_COMMUNITIES = 64
NODES_PER_COMMUNITY = 32
"""Small graphs get fewer communities: at least this many nodes each."""
LATENT_NOISE = 0.6
"""Standard deviation of a node's latent offset from its community centre (centres ~ N(0, 1))."""
FEATURE_NOISE = 1.0
"""Standard deviation of the noise added to each feature (the projection has unit gain)."""
HOMOPHILY = 0.9
CANDIDATES = 16
POPULARITY_SIGMA = 1.0
STUBS_PER_NODE = 8
MAX_ROUNDS = 16
DRAW_CHUNK = 1 << 16
"""Edges drawn per task: bounds each thread's [chunk, CANDIDATES, LATENT_DIM] temporaries
(~70 MB). The draw depends on it (one stream per chunk): changing it changes the graph."""
FEATURE_ROWS = 1 << 14
"""Feature rows drawn per task (one stream per block): changing it changes the features."""

ProgressFn = Callable[[float], None]
Communities = tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.int64]]
"""Nodes grouped by community, and each community's start and size in that order."""


class _Latent(NamedTuple):
    """What an edge draw reads: each node's community, unit latent direction and
    popularity stubs, and the nodes grouped by community."""

    comm: npt.NDArray[np.int32]
    direction: npt.NDArray[np.float32]
    stubs: npt.NDArray[np.int32]
    communities: Communities


def num_communities(num_nodes: int) -> int:
    return max(1, min(NUM_COMMUNITIES, num_nodes // NODES_PER_COMMUNITY))


def _stream(seq: np.random.SeedSequence, *key: int) -> np.random.Generator:
    """The generator of one chunk: ``seq``'s child at ``key`` (no shared state)."""
    return np.random.default_rng(
        np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, *key))
    )


def generate_link(spec: SyntheticLinkDataset, *, progress: ProgressFn | None = None) -> LinkData:
    """Generate the graph of ``spec``; deterministic by ``spec.seed``."""
    n, m, f = spec.num_nodes, spec.num_edges, spec.num_features
    report = progress or (lambda _: None)
    threads = host_threads()
    s_comm, s_latent, s_pop, s_edge, s_feat = np.random.SeedSequence(spec.seed).spawn(5)
    r_comm, r_latent, r_pop = (np.random.default_rng(s) for s in (s_comm, s_latent, s_pop))
    c = num_communities(n)
    comm = r_comm.integers(0, c, n).astype(np.int32)
    centres = r_latent.standard_normal((c, LATENT_DIM)).astype(np.float32)
    z = centres[comm]
    z += np.float32(LATENT_NOISE) * r_latent.standard_normal((n, LATENT_DIM), dtype=np.float32)
    direction = z / np.linalg.norm(z, axis=1, keepdims=True)
    pop = r_pop.lognormal(0.0, POPULARITY_SIGMA, n)
    copies = np.maximum(1, np.rint(pop / pop.mean() * STUBS_PER_NODE)).astype(np.int64)
    del pop
    stubs = np.repeat(np.arange(n, dtype=np.int32), copies)
    del copies
    members = np.argsort(comm, kind="stable").astype(np.int32)  # nodes grouped by community
    comm_size = np.bincount(comm, minlength=c).astype(np.int64)
    comm_start = np.concatenate([[0], np.cumsum(comm_size)[:-1]]).astype(np.int64)
    report(0.05)

    latent = _Latent(comm, direction, stubs, (members, comm_start, comm_size))
    src, dst = _edges(n, m, latent, s_edge, report, threads)
    del latent
    del stubs, direction, members
    report(0.75)
    x = _features(z, f, s_feat, threads)
    report(1.0)
    data = LinkData(
        x=x,
        src=src,
        dst=dst,
        name="synthetic-link",
        info={
            "generator": "latent communities, popularity, nearest of candidates",
            "communities": c,
        },
    )
    data.validate()
    return data


def _edges(
    n: int,
    m: int,
    latent: _Latent,
    seq: np.random.SeedSequence,
    report: ProgressFn,
    threads: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Exactly ``m`` directed edges, no self-loops, each undirected pair at most once, in
    the order they were drawn. A small graph whose communities run out of distinct pairs
    near each source gets fewer candidates per edge in later rounds (weaker preference)."""
    src = np.empty(0, dtype=np.int64)
    dst = np.empty(0, dtype=np.int64)
    for rounds in range(1, MAX_ROUNDS + 1):
        want = int((m - len(src)) * (1.03 if rounds == 1 else 1.5)) + 64
        new_src = np.empty(want, dtype=np.int64)
        new_dst = np.empty(want, dtype=np.int64)
        k = max(1, CANDIDATES >> (rounds - 1))

        def task(
            c: int,
            a: int,
            b: int,
            k: int = k,
            r: int = rounds,
            out: tuple[Any, Any] = (new_src, new_dst),
        ) -> None:
            u, v = _draw(b - a, k, latent, _stream(seq, r, c))
            out[0][a:b] = u
            out[1][a:b] = v

        run_parallel(
            task, [(c, a, b) for c, (a, b) in enumerate(chunks(want, DRAW_CHUNK))], threads
        )
        report(0.05 + 0.6 * min(1.0, (len(src) + want) / m))
        src = np.concatenate([src, new_src])
        dst = np.concatenate([dst, new_dst])
        del new_src, new_dst
        first = first_occurrences(src, dst, n, threads)  # in draw order: later repeats go
        src, dst = src[first], dst[first]
        del first
        if len(src) >= m:
            return src[:m].copy(), dst[:m].copy()
        log.debug("edge round %d: %d distinct edges of %d", rounds, len(src), m)
    raise ValueError(f"cannot draw {m} distinct edges on {n} nodes; raise the scale")


def _draw(
    size: int, k: int, latent: _Latent, rng: np.random.Generator
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``size`` edges: popular sources; of ``k`` uniform destinations (of the source's
    community with probability HOMOPHILY) the one nearest in direction to the source."""
    comm, direction, stubs, (members, comm_start, comm_size) = latent
    n = len(comm)
    u = stubs[rng.integers(0, len(stubs), size)].astype(np.int64)
    cu = comm[u].astype(np.int64)
    intra = rng.random(size) < HOMOPHILY
    draw = rng.random((size, k))
    pos = np.where(
        intra[:, None],
        comm_start[cu][:, None] + (draw * comm_size[cu][:, None]).astype(np.int64),
        (draw * n).astype(np.int64),
    )
    cand = np.take(members, np.minimum(pos, n - 1)).astype(np.int64)
    # np.take: a row gather several times faster than fancy indexing
    sim = np.einsum("ekd,ed->ek", np.take(direction, cand, axis=0), np.take(direction, u, axis=0))
    v = np.take_along_axis(cand, np.argmax(sim, axis=1)[:, None], axis=1)[:, 0]
    return u, v


def _features(
    z: npt.NDArray[np.float32], f: int, seq: np.random.SeedSequence, threads: int
) -> npt.NDArray[Any]:
    """A fixed random projection of the latent positions (unit gain) plus noise, float32;
    each block of :data:`FEATURE_ROWS` rows draws its noise from its own stream."""
    proj_rng = _stream(seq, 0)
    proj = (proj_rng.standard_normal((LATENT_DIM, f)) / np.sqrt(LATENT_DIM)).astype(np.float32)
    n = len(z)
    x = np.empty((n, f), dtype=np.float32)

    def block(i: int, a: int, b: int) -> None:
        rng = _stream(seq, 1, i)
        out = x[a:b]
        rng.standard_normal((b - a, f), dtype=np.float32, out=out)
        out *= np.float32(FEATURE_NOISE)
        out += z[a:b] @ proj

    run_parallel(block, [(i, a, b) for i, (a, b) in enumerate(chunks(n, FEATURE_ROWS))], threads)
    return x
