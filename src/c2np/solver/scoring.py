"""Scoring of candidate translations: do the images of the probe atoms land on atoms?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from c2np.solver.frame import ELEMENT_KEY, Bounds

__all__ = ["BatchScores", "concatenate_scores", "score_batch"]


@dataclass(frozen=True, eq=False)
class BatchScores:
    """Scores of b candidate translations.

    Attributes:
        vectors: (b, 3) the candidates (Å).
        refined: (b, 3) the candidates shifted by their mean matched displacement (Å).
        n_in: (b,) in-particle images.
        n_elem: (b,) distinct elements among the in-particle images.
        residuals: b arrays of residual distances (Å; inf where no same-element atom is
            within the loose tolerance).
        ms: (b,) mean squared residual about the refined vector (Å²; inf without a match).
    """

    vectors: np.ndarray
    refined: np.ndarray
    n_in: np.ndarray
    n_elem: np.ndarray
    residuals: list[np.ndarray]
    ms: np.ndarray


def concatenate_scores(batches: list[BatchScores]) -> BatchScores:
    """The batches as one (in order)."""
    residuals: list[np.ndarray] = []
    for b in batches:
        residuals.extend(b.residuals)
    return BatchScores(np.concatenate([b.vectors for b in batches]),
                       np.concatenate([b.refined for b in batches]),
                       np.concatenate([b.n_in for b in batches]),
                       np.concatenate([b.n_elem for b in batches]),
                       residuals,
                       np.concatenate([b.ms for b in batches]))


def score_batch(cands: np.ndarray, probe_pos: np.ndarray, probe_key: np.ndarray, tree: Any,
                positions4: np.ndarray, bounds: Bounds, tol_loose: float) -> BatchScores:
    """Score (b, 3) candidate translations on (p, 3) probe positions (element keys (p,)):
    the images ``x ± t`` inside ``bounds`` are matched to the nearest same-element atom of
    ``tree`` within ``tol_loose`` (Å)."""
    b = len(cands)
    p = len(probe_pos)
    signs = np.array([1.0, -1.0])
    img = probe_pos[None, None, :, :] + signs[None, :, None, None] * cands[:, None, None, :]  # (b,2,p,3)
    inside = bounds.inside(img)
    flat_img = img[inside]
    keys = np.broadcast_to(probe_key[None, None, :], (b, 2, p))[inside]
    q = np.column_stack([flat_img, keys])
    dist, idx = tree.query(q, k=1, distance_upper_bound=tol_loose)
    cand_id = np.broadcast_to(np.arange(b)[:, None, None], (b, 2, p))[inside]
    sign_id = np.broadcast_to(signs[None, :, None], (b, 2, p))[inside]
    n_in = np.bincount(cand_id, minlength=b)
    matched = np.isfinite(dist)
    # refined vector: + image: t + (x_j - y); - image: t - (x_j - y)
    delta = np.zeros_like(flat_img)
    delta[matched] = positions4[idx[matched], :3] - flat_img[matched]
    contrib = sign_id[:, None] * delta
    n_match = np.bincount(cand_id[matched], minlength=b)
    sums = np.column_stack([np.bincount(cand_id[matched], weights=contrib[matched, j], minlength=b)
                            for j in range(3)])
    mean_shift = sums / np.maximum(n_match, 1)[:, None]
    refined = cands + mean_shift
    # mean squared residual about the refined vector: the candidate came from one noisy
    # pair, so its own offset is removed before residuals are compared
    sq = np.bincount(cand_id[matched], weights=np.einsum("ij,ij->i", contrib[matched], contrib[matched]),
                     minlength=b)
    # a variance, E|c|^2 - |E c|^2: clipped at 0 where rounding makes an exact match slightly
    # negative (its square root is the search's noise level, not NaN)
    ms = np.where(n_match > 0, np.maximum(sq / np.maximum(n_match, 1)
                                          - np.einsum("ij,ij->i", mean_shift, mean_shift), 0.0), np.inf)
    order = np.argsort(cand_id, kind="stable")
    dist_sorted = dist[order]
    splits = np.cumsum(n_in)[:-1]
    res_list = np.split(dist_sorted, splits)
    # distinct elements among the in-particle images: a vector joining two sites of one
    # sublattice maps that sublattice exactly, so images of one kind alone prove little
    seen = np.zeros((b, 119), dtype=bool)
    seen[cand_id, np.rint(keys / ELEMENT_KEY).astype(np.int64)] = True
    n_elem = seen.sum(axis=1)
    return BatchScores(cands, refined, n_in, n_elem, res_list, ms)
