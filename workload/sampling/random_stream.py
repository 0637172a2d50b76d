"""The random stream a sampler draws from: a ``torch.Generator`` on its device, seeded,
reseedable, pickled by its state (captured CUDA graphs are dropped, and captured again), and
replaced after a failed CUDA-graph capture."""

from __future__ import annotations

import warnings
from typing import Any

import torch

FALLBACK_SEED_OFFSET = 1_000_003
"""Added to the seed of the generator that replaces one a failed capture left unusable."""


class RandomStream:
    """Mixed into the samplers: ``device``, ``generator``, ``_seed`` and ``_graphs`` (the
    captured CUDA graphs, keyed by capacity)."""

    device: torch.device
    generator: torch.Generator
    _seed: int
    _graphs: dict[Any, Any]

    def _start_stream(self, seed: int) -> None:
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self._seed = seed

    def _restart_after_failed_capture(self) -> None:
        """A new generator: the old one is registered with the graph whose capture failed."""
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self._seed + FALLBACK_SEED_OFFSET)

    def reseed(self, seed: int) -> None:
        """Restart the random stream (e.g. per data-loader worker or per rank)."""
        self._seed = seed
        self.generator.manual_seed(seed)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["generator"] = self.generator.get_state()
        state["_graphs"] = {}
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        generator_state = state.pop("generator")
        self.__dict__.update(state)
        self.generator = torch.Generator(device=self.device)
        self.generator.set_state(generator_state)  # type: ignore[arg-type]


def reset_default_generator(device: torch.device) -> None:
    """Give the device's default CUDA generator a fresh state with its seed.

    A CUDA graph capture that failed midway leaves the generators registered with it in
    capture mode, where any later draw (dropout, say) raises.
    """
    index = device.index if device.index is not None else torch.cuda.current_device()
    default = torch.cuda.default_generators[index]
    fresh = torch.Generator(device=torch.device("cuda", index))
    try:
        fresh.manual_seed(default.initial_seed())
        default.graphsafe_set_state(fresh)
    except (AttributeError, RuntimeError) as err:  # older torch: nothing to repair
        warnings.warn(f"could not reset the default CUDA generator: {err}", stacklevel=3)
