"""Aggregation of per-sample scores: failure-penalised means with seeded 95 % percentile
bootstrap intervals, the mean over successes, and counts, overall and per group."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from c2np.limits import check as check_limit

__all__ = ["bootstrap_mean_ci", "aggregate", "aggregate_groups"]

#: Resample draws (resamples x samples) held in memory at once.
_BLOCK_DRAWS = 4_000_000


def bootstrap_mean_ci(values: np.ndarray, *, n_resamples: int = 1000, seed: int | Sequence[int] = 0,
                      confidence: float = 0.95) -> np.ndarray:
    """Percentile-bootstrap interval of the mean of each column of ``values`` (n, m).

    Returns (m, 2) lower and upper bounds. Resampling counts are drawn once (shared by
    the columns) from ``numpy.random.default_rng(seed)``. A single sample gives [v, v].
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    n = len(v)
    if n == 0:
        return np.full((v.shape[1], 2), np.nan)
    if n == 1:
        return np.repeat(v[0][:, None], 2, axis=1)
    check_limit("bootstrap", n_resamples, what="bootstrap resamples")
    rng = np.random.default_rng(seed)
    means = np.empty((n_resamples, v.shape[1]))
    block = max(1, _BLOCK_DRAWS // n)  # resamples drawn at once: memory stays bounded
    for start in range(0, n_resamples, block):
        k = min(block, n_resamples - start)
        draws = rng.integers(0, n, size=(k, n))  # the same stream as one (n_resamples, n) draw
        counts = np.bincount((draws + (np.arange(k) * n)[:, None]).ravel(), minlength=k * n).reshape(k, n)
        means[start:start + k] = counts @ v / n
    alpha = (1.0 - confidence) / 2.0
    return np.quantile(means, [alpha, 1.0 - alpha], axis=0).T


def _group_seed(seed: int, key: str) -> list[int]:
    return [int(seed), zlib.crc32(key.encode())]


def aggregate(values: np.ndarray, ok: np.ndarray, names: Sequence[str], *, key: str = "overall",
              n_resamples: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per-metric summary of a group of samples.

    ``values`` (n, m) holds each sample's value, failures already at their penalty value;
    ``ok`` (n,) marks successes. Returns ``{metric: {mean, ci95, mean_successes, n,
    n_failed}}``: ``mean`` is the failure-penalised mean with its bootstrap interval,
    ``mean_successes`` the mean over successes only (None when all failed). The bootstrap
    seed is ``[seed, crc32(key)]``, so each group has its own reproducible stream.
    """
    v = np.asarray(values, dtype=np.float64)
    okm = np.asarray(ok, dtype=bool)
    ci = bootstrap_mean_ci(v, n_resamples=n_resamples, seed=_group_seed(seed, key))
    n_failed = int(np.sum(~okm))
    out: dict[str, dict[str, Any]] = {}
    for j, name in enumerate(names):
        col = v[:, j]
        succ = col[okm]
        out[str(name)] = {
            "mean": float(col.mean()) if len(col) else None,
            "ci95": [float(ci[j, 0]), float(ci[j, 1])] if len(col) else None,
            "mean_successes": float(succ.mean()) if len(succ) else None,
            "n": int(len(col)),
            "n_failed": n_failed,
        }
    return out


def aggregate_groups(values: np.ndarray, ok: np.ndarray, names: Sequence[str], labels: np.ndarray,
                     prefix: str, *, n_resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """:func:`aggregate` for each distinct label of ``labels`` (n,) (numbers before strings,
    each sorted); group keys are the labels as strings, bootstrap keys ``{prefix}:{label}``."""
    lab = np.asarray(labels, dtype=object)
    out: dict[str, Any] = {}
    for g in sorted(set(lab.tolist()), key=lambda x: (isinstance(x, str), x)):
        m = lab == g
        out[str(g)] = aggregate(values[m], ok[m], names, key=f"{prefix}:{g}",
                                n_resamples=n_resamples, seed=seed)
    return out
