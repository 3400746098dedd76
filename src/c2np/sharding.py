"""Shards of one job for job arrays (``--shard I/N``): which items a shard holds, and the
check that a set of partial results is all the shards of one run. Used by evaluate
(:mod:`c2np.evaluation.shards`), predict (:func:`c2np.models.training.merge_predictions`)
and catalog build (:func:`c2np.catalog.build.merge_catalogs`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError
from c2np.terminal import printable, shortened

__all__ = ["parse_shard", "shard_positions", "check_shard_set", "ids_sha256", "MAX_SHARDS", "SHARD_ENTRY_SCHEMA"]


#: Most shards of one job (a job array of a million tasks is beyond any scheduler).
MAX_SHARDS = 1_000_000


def parse_shard(spec: str) -> tuple[int, int]:
    """``"I/N"`` -> (I, N) with 0 <= I < N (bad input otherwise)."""
    parts = spec.split("/")
    if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise C2NPInputError(f"--shard {shortened(spec, 40)}: expected I/N, e.g. 0/4 (I = 0 .. N-1)")
    if any(len(p.strip()) > 7 for p in parts):
        raise C2NPInputError(f"--shard {shortened(spec, 40)}: at most {MAX_SHARDS:,} shards")
    i, n = int(parts[0]), int(parts[1])
    if n > MAX_SHARDS:
        raise C2NPInputError(f"--shard {shortened(spec, 40)}: at most {MAX_SHARDS:,} shards")
    if n < 1 or not 0 <= i < n:
        raise C2NPInputError(f"--shard {shortened(spec, 40)}: need N >= 1 and 0 <= I < N")
    return i, n


def shard_positions(n_rows: int, index: int, count: int) -> np.ndarray:
    """Positions (0 .. n_rows−1) of shard ``index`` of ``count``: k with k % count == index."""
    if count < 1 or not 0 <= index < count:
        raise C2NPInputError(f"shard {index}/{count}: need count >= 1 and 0 <= index < count")
    return np.arange(index, n_rows, count, dtype=np.int64)


#: The schema (:mod:`c2np.structured`) of the ``shard`` entry of every partial document.
SHARD_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["index", "count"],
    "properties": {"index": {"type": "integer", "minimum": 0, "maximum": MAX_SHARDS - 1},
                   "count": {"type": "integer", "minimum": 1, "maximum": MAX_SHARDS}},
}


_PART_SCHEMA: dict[str, Any] = {"type": "object", "required": ["shard"], "properties": {"shard": SHARD_ENTRY_SCHEMA}}


def check_shard_set(parts: Sequence[tuple[str, Mapping[str, Any]]], *, keys: Sequence[str],
                    what: str) -> int:
    """Check that partial documents ``(path, doc)`` are the shards of one run and all of
    them: every ``doc[key]`` for ``key`` in ``keys`` equals the first part's (else "a part of
    another run"), one shard count N, each index 0 .. N−1 exactly once (a repeated or a
    missing shard is an error). ``doc["shard"]`` is ``{"index": I, "count": N}`` with
    0 <= I < N <= :data:`MAX_SHARDS`. Returns N; ``what`` names the command in the messages
    (bad input: :class:`C2NPInputError`), which stay short whatever N is."""
    from c2np.structured import validate

    if not parts:
        raise C2NPInputError(f"{what}: no parts given")
    for path, d in parts:
        validate(d, _PART_SCHEMA, source=f"{what}: {printable(path)}")
        if d["shard"]["index"] >= d["shard"]["count"]:
            raise C2NPInputError(f"{what}: {printable(path)}: shard index {d['shard']['index']} is not below "
                                 f"its count {d['shard']['count']}")
    first_path, ref = parts[0]
    count = int(ref["shard"]["count"])
    seen: dict[int, str] = {}
    for path, d in parts:
        for key in keys:
            if d.get(key) != ref.get(key):
                raise C2NPInputError(f"{what}: {printable(path)}: {key} differs from {printable(first_path)} "
                                     "(a part of another run)")
        if int(d["shard"]["count"]) != count:
            raise C2NPInputError(f"{what}: {printable(path)}: shard count {d['shard']['count']} != {count}")
        i = int(d["shard"]["index"])
        if i in seen:
            raise C2NPInputError(f"{what}: shard {i}/{count} given twice ({printable(seen[i])}, {printable(path)})")
        seen[i] = path
    if len(seen) < count:
        missing = []
        for i in range(count):  # at most len(seen) + 5 steps
            if i not in seen:
                missing.append(f"{i}/{count}")
                if len(missing) == 5:
                    break
        more = count - len(seen) - len(missing)
        raise C2NPInputError(f"{what}: missing shard(s) {', '.join(missing)}"
                             + (f" and {more:,} more" if more else ""))
    return count


def ids_sha256(sample_ids: Sequence[str]) -> str:
    """SHA-256 of the evaluated sample ids (newline-joined, in row order)."""
    return hashlib.sha256("\n".join(sample_ids).encode()).hexdigest()
