"""The threads a fit's numpy work runs on: `thread_pool` and `threaded_map`.

Sorting the columns, searching them, routing trees and checking the float32
rounding are numpy calls that release the GIL for their whole length, so the
threads a user gives the learner (``n_jobs``) can share them too: the same
results, in the same order, at most ``threads`` calls at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["thread_pool", "threaded_map"]

T = TypeVar("T")
R = TypeVar("R")


class _Inline:
    """`ThreadPoolExecutor`'s ``map`` on the calling thread (and its ``with``)."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @staticmethod
    def map(fn: Callable[..., Any], *iterables: Iterable[Any]) -> Iterator[Any]:
        return map(fn, *iterables)


def thread_pool(threads: int) -> ThreadPoolExecutor | _Inline:
    """A pool of ``threads`` threads to ``map`` on in a ``with`` block, or the calling
    thread alone (``threads`` <= 1): one pool for all the batches of a stage."""
    return ThreadPoolExecutor(threads) if threads > 1 else _Inline()


def threaded_map(fn: Callable[[T], R], items: Iterable[T], threads: int) -> list[R]:
    """``[fn(x) for x in items]``, up to ``threads`` calls at a time (on the calling
    thread alone when ``threads`` <= 1 or there is one item)."""
    items = list(items)
    with thread_pool(min(threads, len(items))) as pool:
        return list(pool.map(fn, items))
