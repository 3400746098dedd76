"""Why the exact pair histogram of a collapsed prediction cannot group pairs by cells, and
what certified bounds a cell-pair grouping would give (issue 15, docs/evaluation.md "Third
pass").

For the collapsed prediction of ``metrics_speed.quality_cases`` (8,927 atoms within 1 Å of
the centre) and cells of side f·Δ (Δ = 10/128 Å, the bin width): the occupied cells, the
cell pairs, the share of the pairs whose cell pair lies within one bin (countable in one
step), and simple certified bounds of Σ c_k² (the RDF energy's dominant term) against its
true value. The bounds: exact counts e_k of the one-bin cell pairs; for the others (n_g
pairs, bins lo_g..hi_g) Σ c² >= max(Σ e² + 2 Σ n_g min e, C² / reachable bins) and
Σ c² <= Σ e² + 2 Σ n_g max e + Σ n_g max u, with u_k the mass that may fall in bin k.
Distances are taken between the cells' point bounding boxes (exact arithmetic is not
needed for the shares and ratios printed here).

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/histogram_grouping.py [--factors 2 1 0.5]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

N_BINS = 128
DELTA = 10.0 / N_BINS


def grouping(x: np.ndarray, h: float, true: np.ndarray) -> dict[str, float]:
    """Shares and Σ c² bounds for cells of side ``h`` (Å); ``true``: the exact counts."""
    cells = np.floor(x / h).astype(np.int64)
    _, inv, cnt = np.unique(cells, axis=0, return_inverse=True, return_counts=True)
    inv = inv.ravel()
    m = len(cnt)
    lo = np.full((m, 3), np.inf)
    hi = np.full((m, 3), -np.inf)
    np.minimum.at(lo, inv, x)
    np.maximum.at(hi, inv, x)
    e = np.zeros(N_BINS + 1)
    g_lo, g_hi, g_n = [], [], []
    n_cell_pairs = 0
    for i0 in range(0, m, 400):
        a = slice(i0, min(m, i0 + 400))
        gap = np.maximum(0, np.maximum(lo[None] - hi[a, None], lo[a, None] - hi[None]))
        far = np.maximum(hi[None] - lo[a, None], hi[a, None] - lo[None])
        k_lo = np.minimum(np.floor(np.sqrt((gap ** 2).sum(-1)) / DELTA), N_BINS).astype(int)
        k_hi = np.minimum(np.floor(np.sqrt((far ** 2).sum(-1)) / DELTA), N_BINS).astype(int)
        ii = np.arange(a.start, a.stop)[:, None]
        jj = np.arange(m)[None, :]
        w = np.where(jj > ii, cnt[a, None] * cnt[None, :],
                     np.where(jj == ii, cnt[a, None] * (cnt[a, None] - 1) // 2, 0))
        n_cell_pairs += int(np.count_nonzero(jj >= ii))
        sel = w > 0
        one = sel & (k_lo == k_hi)
        np.add.at(e, k_lo[one], w[one])
        rest = sel & (k_lo != k_hi)
        g_lo.append(k_lo[rest])
        g_hi.append(k_hi[rest])
        g_n.append(w[rest])
    glo, ghi = np.concatenate(g_lo), np.concatenate(g_hi)
    gn = np.concatenate(g_n).astype(np.float64)
    total = float(true.sum())
    u = np.zeros(N_BINS + 2)
    np.add.at(u, glo, gn)
    np.add.at(u, ghi + 1, -gn)
    u = np.cumsum(u)[:N_BINS + 1]
    max_e, min_e, max_u = np.zeros(len(gn)), np.full(len(gn), np.inf), np.zeros(len(gn))
    for d in range(int((ghi - glo).max(initial=0)) + 1):
        k = np.minimum(glo + d, ghi)
        max_e, min_e, max_u = np.maximum(max_e, e[k]), np.minimum(min_e, e[k]), np.maximum(max_u, u[k])
    upper = float((e ** 2).sum() + 2 * (gn * max_e).sum() + (gn * max_u).sum())
    reachable = int(np.count_nonzero((e > 0) | (u > 0)))
    lower = max(float((e ** 2).sum() + 2 * (gn * min_e).sum()), total * total / reachable)
    sq = float((true.astype(np.float64) ** 2).sum())
    return {"cells": m, "atoms_per_cell": len(x) / m, "cell_pairs": n_cell_pairs,
            "one_bin_share": float(e.sum()) / total,
            "mean_span_bins": float((ghi - glo).mean() + 1) if len(gn) else 1.0,
            "lower_ratio": lower / sq, "upper_ratio": upper / sq}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--factors", type=float, nargs="+", default=[2.0, 1.0, 0.5, 0.25],
                    help="cell sides in units of the bin width")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from c2np.metrics import pair_distance_counts
    from metrics_speed import perovskite, quality_cases

    _, cases = quality_cases(perovskite(), 30.0)
    x = cases["collapsed (all within 1 Å)"][1]
    true = pair_distance_counts(x)
    print(f"collapsed prediction: {len(x)} atoms, {int(true.sum())} pairs within 10 Å")
    print("cell side | cells | atoms/cell | cell pairs | pairs in one-bin cell pairs | "
          "mean span (bins) | Σc² bounds / true")
    for f in args.factors:
        r = grouping(x, f * DELTA, true)
        print(f"{f:g} Δ | {r['cells']} | {r['atoms_per_cell']:.2f} | {r['cell_pairs']:,} | "
              f"{r['one_bin_share']:.2f} | {r['mean_span_bins']:.1f} | "
              f"[{r['lower_ratio']:.2f}, {r['upper_ratio']:.1f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
