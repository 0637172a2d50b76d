"""Completed futures: what a stand-in fetch function hands back in place of an RPC's."""

from __future__ import annotations

from typing import TypeVar

from torch.futures import Future

T = TypeVar("T")


def done(value: T) -> Future[T]:
    """A future that already holds ``value``."""
    fut: Future[T] = Future()
    fut.set_result(value)
    return fut
