"""``Executor.map_unordered``: every item's result exactly once, whatever the order, for the
local pool (a window of chunks in flight), one process and the batched default; errors of the
items' iterator and of a chunk reach the caller."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from c2np.executor import Context, Executor, LocalExecutor


def _slow_square(state: int, item: int) -> tuple[int, int, int]:
    """(item, state · item², pid); odd items take longer, so chunks finish out of order."""
    if item % 2:
        sum(range(20_000 * (item % 7)))
    return item, state * item * item, os.getpid()


def _fails_on_13(state: int, item: int) -> int:
    if item == 13:
        raise ValueError("item 13")
    return item


class _Serial(Executor):
    """The base class's batched ``map_unordered`` over an in-order serial ``map``."""

    workers = 3

    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], *,
            context: Context | None = None, chunk: int = 1) -> Iterator[list[Any]]:
        state = context.build() if context is not None else None
        for i in range(0, len(items), chunk):
            yield [fn(state, x) for x in items[i:i + chunk]]


@pytest.mark.parametrize("make", [lambda: LocalExecutor(1), lambda: LocalExecutor(2), _Serial])
@pytest.mark.parametrize("n, chunk", [(0, 3), (1, 4), (57, 4), (64, 1), (30, 50)])
def test_every_item_once(make: Callable[[], Executor], n: int, chunk: int) -> None:
    ex = make()
    read: list[int] = []

    def items() -> Iterator[int]:  # a generator, read lazily
        for k in range(n):
            read.append(k)
            yield k

    try:
        parts = list(ex.map_unordered(_slow_square, items(), context=Context(None, (), value=3),
                                      chunk=chunk))
    finally:
        ex.close()
    got = [r for part in parts for r in part]
    assert all(1 <= len(part) <= chunk for part in parts)
    assert sorted(r[0] for r in got) == list(range(n)) == read
    assert all(v == 3 * k * k for k, v, _ in got)
    if isinstance(ex, LocalExecutor) and ex.workers == 2 and n > 8:
        assert os.getpid() not in {pid for *_, pid in got}  # scored by the pool


def test_window_reads_ahead_only_a_few_chunks() -> None:
    """The pool keeps 2 chunks per worker submitted: the iterator is not drained up front."""
    ex = LocalExecutor(2)
    read: list[int] = []

    def items() -> Iterator[int]:
        for k in range(400):
            read.append(k)
            yield k

    try:
        it = ex.map_unordered(_slow_square, items(), context=Context(None, (), value=1), chunk=2)
        next(it)
        assert len(read) <= 2 * 2 * 2 + 2 + 1  # 4 chunks of 2 in flight, one more, one look-ahead
        rest = [r for part in it for r in part]
        assert len(rest) == 398
    finally:
        ex.close()


@pytest.mark.parametrize("make", [lambda: LocalExecutor(1), lambda: LocalExecutor(2), _Serial])
def test_errors_reach_the_caller(make: Callable[[], Executor]) -> None:
    ex = make()

    def bad_items() -> Iterator[int]:
        yield from range(10)
        raise KeyError("frame 10")

    try:
        with pytest.raises(KeyError, match="frame 10"):
            for _ in ex.map_unordered(_slow_square, bad_items(), context=Context(None, (), value=1),
                                      chunk=3):
                pass
        with pytest.raises(ValueError, match="item 13"):
            for _ in ex.map_unordered(_fails_on_13, range(40), chunk=4):
                pass
    finally:
        ex.close()
