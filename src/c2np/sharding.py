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

__all__ = ["parse_shard", "shard_positions", "check_shard_set", "ids_sha256"]


def parse_shard(spec: str) -> tuple[int, int]:
    """``"I/N"`` -> (I, N) with 0 <= I < N (bad input otherwise)."""
    parts = spec.split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise C2NPInputError(f"--shard {spec!r}: expected I/N, e.g. 0/4 (I = 0 .. N-1)")
    i, n = int(parts[0]), int(parts[1])
    if n < 1 or not 0 <= i < n:
        raise C2NPInputError(f"--shard {spec!r}: need N >= 1 and 0 <= I < N")
    return i, n


def shard_positions(n_rows: int, index: int, count: int) -> np.ndarray:
    """Positions (0 .. n_rows−1) of shard ``index`` of ``count``: k with k % count == index."""
    if count < 1 or not 0 <= index < count:
        raise C2NPInputError(f"shard {index}/{count}: need count >= 1 and 0 <= index < count")
    return np.arange(index, n_rows, count, dtype=np.int64)


def check_shard_set(parts: Sequence[tuple[str, Mapping[str, Any]]], *, keys: Sequence[str],
                    what: str) -> int:
    """Check that partial documents ``(path, doc)`` are the shards of one run and all of
    them: every ``doc[key]`` for ``key`` in ``keys`` equals the first part's (else "a part of
    another run"), one shard count N, each index 0 .. N−1 exactly once (a repeated or a
    missing shard is an error). ``doc["shard"]`` is ``{"index": I, "count": N}``. Returns N;
    ``what`` names the command in the messages (bad input: :class:`C2NPInputError`)."""
    if not parts:
        raise C2NPInputError(f"{what}: no parts given")
    first_path, ref = parts[0]
    count = int(ref["shard"]["count"])
    seen: dict[int, str] = {}
    for path, d in parts:
        for key in keys:
            if d.get(key) != ref.get(key):
                raise C2NPInputError(f"{what}: {path}: {key} differs from {first_path} (a part of another run)")
        if int(d["shard"]["count"]) != count:
            raise C2NPInputError(f"{what}: {path}: shard count {d['shard']['count']} != {count}")
        i = int(d["shard"]["index"])
        if i in seen:
            raise C2NPInputError(f"{what}: shard {i}/{count} given twice ({seen[i]}, {path})")
        seen[i] = path
    missing = sorted(set(range(count)) - set(seen))
    if missing:
        raise C2NPInputError(f"{what}: missing shard(s) {', '.join(f'{i}/{count}' for i in missing)}")
    return count


def ids_sha256(sample_ids: Sequence[str]) -> str:
    """SHA-256 of the evaluated sample ids (newline-joined, in row order)."""
    return hashlib.sha256("\n".join(sample_ids).encode()).hexdigest()
