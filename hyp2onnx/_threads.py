"""One helper for the numpy work a fit does besides the library's: ``threaded_map``.

Sorting the columns, searching them and checking the float32 rounding are
numpy calls that release the GIL for their whole length, so the threads a
user gives the learner (``n_jobs``) can share them too: the same results, in
the same order, at most ``threads`` calls at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["threaded_map"]

T = TypeVar("T")
R = TypeVar("R")


def threaded_map(fn: Callable[[T], R], items: Iterable[T], threads: int) -> list[R]:
    """``[fn(x) for x in items]``, up to ``threads`` calls at a time (on the calling
    thread alone when ``threads`` <= 1 or there is one item)."""
    items = list(items)
    if threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(min(threads, len(items))) as pool:
        return list(pool.map(fn, items))
