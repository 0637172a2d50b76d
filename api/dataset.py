"""The dataset section of a DistGNNJob: the graph to train on, and the shared-volume paths it names."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from distgnn_api.base_model import Model, OmitsUnset
from distgnn_api.cel import CelRule
from distgnn_api.cel import cel as _cel
from distgnn_api.hetero import HeteroDataset, SyntheticMagDataset
from distgnn_api.hetero_rules import DATASET_RULES as _HETERO_DATASET_RULES
from distgnn_api.link import SyntheticLinkDataset
from distgnn_api.link_rules import DATASET_RULES as _LINK_DATASET_RULES
from distgnn_api.mag_shape import MAG_TARGET_NODE_TYPE

# A path on the shared volume: relative, no "..", no leading slash.
VOLUME_PATH_PATTERN = r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$"
_VOLUME_PATH_RE = re.compile(VOLUME_PATH_PATTERN)


def _check_volume_path(value: str) -> str:
    if not _VOLUME_PATH_RE.fullmatch(value) or any(p == ".." for p in value.split("/")):
        raise ValueError(f"{value!r} {VOLUME_PATH_MESSAGE}")
    return value


VOLUME_PATH_MESSAGE = (
    "must be a relative path on the shared volume; write e.g. 'datasets/ogbn-products' "
    "(no leading '/', no '..')"
)
VolumePath = Annotated[
    str,
    AfterValidator(_check_volume_path),
    Field(
        min_length=1,
        max_length=1024,
        json_schema_extra={
            "pattern": VOLUME_PATH_PATTERN,
            "x-kubernetes-validations": [
                {
                    "rule": "self != '..' && !self.startsWith('../') && !self.endsWith('/..') "
                    "&& !self.contains('/../')",
                    "message": VOLUME_PATH_MESSAGE,
                }
            ],
        },
    ),
]


class SyntheticDataset(Model):
    """A generated graph with learnable labels: communities with homophily and a feature signal.

    The defaults are shaped like ogbn-products, and as hard: at its density a 3-layer
    GraphSAGE reaches about its test accuracy (0.7-0.85) and a model without neighbours
    clearly less (benchmarks/accuracy/).
    """

    num_nodes: int = Field(default=2_449_029, ge=2, le=2_000_000_000)
    """Number of nodes."""
    num_edges: int = Field(default=61_859_140, ge=1, le=50_000_000_000)
    """Number of undirected edges; the stored graph holds each in both directions."""
    num_features: int = Field(default=100, ge=1, le=4096)
    """Node feature dimension."""
    num_classes: int = Field(default=47, ge=2, le=10_000)
    """Number of label classes; each class is one community."""
    homophily: float = Field(default=0.22, ge=0.0, le=1.0)
    """Share of edges whose endpoints are in the same community (0.8 or more makes the labels nearly free to a GNN)."""
    feature_noise: float = Field(default=1.25, ge=0.0, le=100.0)
    """Standard deviation of the Gaussian noise added to each class's feature centroid (of norm 3)."""
    train_fraction: float = Field(default=0.08, gt=0.0, lt=1.0)
    """Share of nodes in the training split."""
    val_fraction: float = Field(default=0.02, ge=0.0, lt=1.0)
    """Share of nodes in the validation split; the rest is the test split."""
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    """Seed of the generator; the same seed gives the same graph."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "self.trainFraction + self.valFraction < 1.0",
            "trainFraction + valFraction must be below 1 to leave a test split",
            ".trainFraction",
            lambda s: s.train_fraction + s.val_fraction < 1.0,
        ),
        _cel(
            "self.numEdges <= self.numNodes * (self.numNodes - 1) / 2",
            "numEdges exceeds what numNodes can hold (numNodes*(numNodes-1)/2 undirected edges); "
            "set numEdges together with numNodes",
            ".numEdges",
            lambda s: s.num_edges <= s.num_nodes * (s.num_nodes - 1) // 2,
        ),
    )


class OgbDataset(Model):
    """An OGB node-property dataset in its raw format, on the shared volume."""

    path: VolumePath
    """Dataset directory relative to the volume, holding raw/ and split/."""
    split_scheme: str | None = Field(default=None, min_length=1, max_length=128)
    """Folder under split/ (e.g. sales_ranking); unset means the only folder there."""


class PygDataset(Model):
    """A torch_geometric.data.Data saved with torch.save on the shared volume."""

    path: VolumePath
    """File path relative to the volume. It needs x, y, edge_index and train/val/test masks."""


class DatasetSpec(OmitsUnset):
    """The graph to train on: set exactly one of synthetic, syntheticMag, syntheticLink, ogb or pyg.

    syntheticMag, or hetero beside ogb or pyg, makes the graph heterogeneous (node and edge
    types); synthetic, or ogb or pyg alone, is a homogeneous graph.
    """

    synthetic: SyntheticDataset | None = None
    """A generated homogeneous graph."""
    ogb: OgbDataset | None = None
    """OGB raw files on the volume (ogbn-mag's layout when hetero is set)."""
    pyg: PygDataset | None = None
    """A PyG file on the volume: a Data, or a HeteroData when hetero is set."""
    synthetic_mag: SyntheticMagDataset | None = None
    """A generated heterogeneous graph shaped like ogbn-mag."""
    synthetic_link: SyntheticLinkDataset | None = None
    """A generated homogeneous graph shaped like ogbl-citation2, for link prediction."""
    hetero: HeteroDataset | None = None
    """The heterogeneous side of the dataset: target node type, declared types, reverse edges."""

    _omitted_when_unset = ("synthetic_mag", "synthetic_link", "hetero")
    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "[has(self.synthetic), has(self.syntheticMag), has(self.syntheticLink), "
            "has(self.ogb), has(self.pyg)].filter(x, x).size() == 1",
            "set exactly one of synthetic, syntheticMag, syntheticLink, ogb or pyg",
            ".synthetic",
            lambda s: (
                sum(
                    x is not None
                    for x in (s.synthetic, s.synthetic_mag, s.synthetic_link, s.ogb, s.pyg)
                )
                == 1
            ),
        ),
        *_HETERO_DATASET_RULES,
        *_LINK_DATASET_RULES,
    )

    @property
    def is_hetero(self) -> bool:
        """True for a graph with node and edge types (syntheticMag, or hetero is set)."""
        return self.synthetic_mag is not None or self.hetero is not None

    @property
    def hetero_section(self) -> HeteroDataset | None:
        """The heterogeneous side as it applies, or None for a homogeneous graph: hetero, or
        its defaults for a syntheticMag without it; syntheticMag's target is always paper."""
        if self.synthetic_mag is None:
            return self.hetero
        section = self.hetero or HeteroDataset()
        if section.target_node_type is None:
            section = section.model_copy(update={"target_node_type": MAG_TARGET_NODE_TYPE})
        return section
