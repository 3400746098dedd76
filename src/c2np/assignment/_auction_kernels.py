"""Compiled ε-scaling auction for the sparse assignment of :mod:`c2np.assignment.auction`,
the greedy saturating pairing and the CSR edge costs of its graph (numba).

Imported only when the sparse path runs (it imports numba); the machine code is cached on
disk beside this file (or in ``NUMBA_CACHE_DIR``) where a cache folder is writable.
"""

from __future__ import annotations

import numpy as np

from c2np._jit import _jit

_INF = np.int64(2) ** 62
_PRICE_LIMIT = np.int64(2) ** 61


@_jit
def _sift_down(hkey: np.ndarray, hval: np.ndarray, pos: int, size: int) -> None:
    """Restore the min-heap order below ``pos`` (heap of ``size`` (key, value) entries)."""
    while True:
        c = 2 * pos + 1
        if c >= size:
            return
        if c + 1 < size and hkey[c + 1] < hkey[c]:
            c += 1
        if hkey[c] >= hkey[pos]:
            return
        hkey[pos], hkey[c] = hkey[c], hkey[pos]
        hval[pos], hval[c] = hval[c], hval[pos]
        pos = c


@_jit
def _heapify(hkey: np.ndarray, hval: np.ndarray, p: np.ndarray) -> int:
    """Fill the heap with (price, column) of every column; returns its size."""
    n = p.shape[0]
    for j in range(n):
        hkey[j] = p[j]
        hval[j] = j
    for s in range(n // 2 - 1, -1, -1):
        _sift_down(hkey, hval, s, n)
    return n


@_jit
def _fix_top(hkey: np.ndarray, hval: np.ndarray, p: np.ndarray) -> None:
    """Correct stale keys at the top until the top key is its column's price: keys only
    lag behind rising prices, so the top is then the cheapest column."""
    n = hkey.shape[0]
    while hkey[0] != p[hval[0]]:
        hkey[0] = p[hval[0]]
        _sift_down(hkey, hval, 0, n)


@_jit
def _two_cheapest(hkey: np.ndarray, hval: np.ndarray, p: np.ndarray):
    """(cheapest column, its price, the second smallest price) from the lazy heap; the
    cheapest stays on top."""
    n = hkey.shape[0]
    _fix_top(hkey, hval, p)
    j1 = hval[0]
    w1 = hkey[0]
    if n == 1:
        return j1, w1, w1
    # the second cheapest is the smaller valid child; fix both children subtrees' tops
    best = _INF
    for c in (1, 2):
        if c < n:
            while hkey[c] != p[hval[c]]:
                hkey[c] = p[hval[c]]
                _sift_down(hkey, hval, c, n)
            best = min(best, hkey[c])
    return j1, w1, best


@_jit
def _row_values(indptr: np.ndarray, indices: np.ndarray, cost: np.ndarray, p: np.ndarray,
                i: int, j0: int):
    """(value of row i's edge to column j0, smallest value of its other edges)."""
    own = _INF
    other = _INF
    row = indices[indptr[i]:indptr[i + 1]]  # slices: no negative-index checks (see auction)
    row_cost = cost[indptr[i]:indptr[i + 1]]
    for e in range(row.shape[0]):  # branch-free
        j = row[e]
        w = row_cost[e] + p[j]
        own = w if j == j0 else own
        other = min(other, _INF if j == j0 else w)
    return own, other


@_jit
def auction(indptr: np.ndarray, indices: np.ndarray, cost: np.ndarray, n_cols: int,
            prices: np.ndarray, init: np.ndarray, eps0: int, eps_final: int, factor: int,
            max_bids: int):
    """Optimal assignment of every row to a distinct column on the given edges.

    Rows ``0..n_rows-1`` have the CSR edges ``indptr`` / ``indices`` with int64 costs;
    ``n_cols - n_rows`` implicit dummy rows may take any column at cost 0 (which makes the
    problem balanced: the dummies' columns are the unpaired ones). Min-cost forward
    auction, Gauss–Seidel, ε-scaling by ``factor`` from ``eps0`` down to ``eps_final``:
    the assignment then meets ε-complementary slackness, so its cost is within
    ``n_cols · eps_final`` of the optimum on the graph (optimal when the costs are
    multiples of ``n_cols + 1`` and ``eps_final`` is 1). ``init``: a starting assignment
    (-1 = none). At the start of each phase every assigned column's price is lowered by
    its row's overpayment (so a row that just bid stays assigned), and only the rows that
    then break ε-complementary slackness are released. Returns ``(assignment of the rows
    in the last completed phase or all -1, prices, status, bids)``: status 0 = done,
    1 = bid budget ``max_bids`` or the price limit reached.
    """
    n_rows = indptr.shape[0] - 1
    n_dummy = n_cols - n_rows
    p = prices.copy()
    owner = np.full(n_cols, -1, dtype=np.int64)
    obj = init.copy()
    warm = False
    for i in range(n_rows):
        if obj[i] >= 0:
            owner[obj[i]] = i
            warm = True
    if warm:  # the columns no row holds are the dummies'
        for j in range(n_cols):
            if owner[j] < 0:
                owner[j] = -2
    best = np.full(n_rows, -1, dtype=np.int64)
    queue = np.empty(max(n_rows, 1), dtype=np.int64)
    hkey = np.empty(n_cols, dtype=np.int64)  # one entry per column; keys may be stale (low)
    hval = np.empty(n_cols, dtype=np.int64)
    bids = 0
    eps = max(eps0, 1)
    while True:
        # keep what still meets eps-CS after removing each row's overpayment
        for i in range(n_rows):
            j0 = obj[i]
            if j0 >= 0:
                own, other = _row_values(indptr, indices, cost, p, i, j0)
                if other < _INF and own > other:
                    p[j0] -= own - other
        pmin = p.min()
        for j in range(n_cols):
            if owner[j] == -2:
                p[j] = pmin
        count = 0
        head = 0
        for i in range(n_rows):
            j0 = obj[i]
            keep = False
            if j0 >= 0:
                own, other = _row_values(indptr, indices, cost, p, i, j0)
                keep = own <= other + eps
            if not keep:
                if j0 >= 0:
                    owner[j0] = -1
                obj[i] = -1
                queue[count] = i
                count += 1
        free_dummy = n_dummy
        pmin = p.min()
        for j in range(n_cols):
            if owner[j] == -2:
                if p[j] <= pmin + eps:
                    free_dummy -= 1
                else:
                    owner[j] = -1
        if n_dummy > 0:
            _heapify(hkey, hval, p)
        while count > 0 or free_dummy > 0:
            if count > 0:
                i = queue[head]
                head = head + 1 if head + 1 < n_rows else 0
                count -= 1
                w1 = _INF
                w2 = _INF
                j1 = -1
                # the row's edges as slices: indexed from 0, numba emits no negative-index
                # check per load (0.84x the auction's time with _row_values, measured)
                row = indices[indptr[i]:indptr[i + 1]]
                row_cost = cost[indptr[i]:indptr[i + 1]]
                for e in range(row.shape[0]):  # branch-free two smallest
                    j = row[e]
                    w = row_cost[e] + p[j]
                    w2 = min(w2, max(w1, w))
                    j1 = j if w < w1 else j1
                    w1 = min(w1, w)
                if w2 == _INF:
                    w2 = w1
                p[j1] += w2 - w1 + eps
                prev = owner[j1]
                owner[j1] = i
                obj[i] = j1
            else:  # a dummy row takes the cheapest column
                j1, w1, w2 = _two_cheapest(hkey, hval, p)
                p[j1] += w2 - w1 + eps
                hkey[0] = p[j1]  # j1 is the top entry: correct its key in place
                _sift_down(hkey, hval, 0, n_cols)
                prev = owner[j1]
                owner[j1] = -2
                free_dummy -= 1
            if prev >= 0:
                t = head + count
                queue[t - n_rows if t >= n_rows else t] = prev
                count += 1
            elif prev == -2:
                free_dummy += 1
            bids += 1
            if bids >= max_bids or p[j1] > _PRICE_LIMIT:
                return best, p, 1, bids
        best[:] = obj
        if eps <= eps_final:
            return best, p, 0, bids
        eps = max(eps_final, eps // factor)



# ----------------------------------------------------------------------------------------
# Greedy saturating pairing and exact potentials
# ----------------------------------------------------------------------------------------
@_jit
def greedy_pairing(indptr: np.ndarray, indices: np.ndarray, cost: np.ndarray,
                   n_cols: int) -> np.ndarray:
    """Each row in order takes its cheapest free column among its edges; -1 where none
    is left (the caller pairs those rows with the free columns)."""
    n_rows = indptr.shape[0] - 1
    used = np.zeros(n_cols, dtype=np.bool_)
    out = np.full(n_rows, -1, dtype=np.int64)
    for i in range(n_rows):
        bj = -1
        bc = _INF
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            if not used[j] and cost[e] < bc:
                bc = cost[e]
                bj = j
        if bj >= 0:
            used[bj] = True
            out[i] = bj
    return out



@_jit
def csr_merge(indptr: np.ndarray, indices: np.ndarray, extra_rows: np.ndarray,
              extra_cols: np.ndarray, n_cols: int):
    """CSR of the union of a CSR graph and extra (row, col) edges, duplicates dropped."""
    n_rows = indptr.shape[0] - 1
    cnt = np.zeros(n_rows + 1, dtype=np.int64)
    for i in range(n_rows):
        cnt[i + 1] = indptr[i + 1] - indptr[i]
    for t in range(extra_rows.shape[0]):
        cnt[extra_rows[t] + 1] += 1
    for i in range(n_rows):
        cnt[i + 1] += cnt[i]
    fill = cnt[:-1].copy()
    tmp = np.empty(cnt[n_rows], dtype=np.int64)
    for i in range(n_rows):
        for e in range(indptr[i], indptr[i + 1]):
            tmp[fill[i]] = indices[e]
            fill[i] += 1
    for t in range(extra_rows.shape[0]):
        i = extra_rows[t]
        tmp[fill[i]] = extra_cols[t]
        fill[i] += 1
    stamp = np.full(n_cols, -1, dtype=np.int64)
    out_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    out = np.empty(cnt[n_rows], dtype=np.int64)
    n = 0
    for i in range(n_rows):
        for e in range(cnt[i], cnt[i + 1]):
            j = tmp[e]
            if stamp[j] != i:
                stamp[j] = i
                out[n] = j
                n += 1
        out_ptr[i + 1] = n
    return out_ptr, out[:n].copy()


@_jit
def edge_costs(small: np.ndarray, large: np.ndarray, indptr: np.ndarray,
               indices: np.ndarray, unit: float, scale: int):
    """Squared distances of the CSR edges (Å², float64) and their integer costs
    ``rint(d² / unit) · scale``."""
    n_rows = indptr.shape[0] - 1
    w = np.empty(indices.shape[0])
    c = np.empty(indices.shape[0], dtype=np.int64)
    for i in range(n_rows):
        s0 = small[i, 0]
        s1 = small[i, 1]
        s2 = small[i, 2]
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            d0 = s0 - large[j, 0]
            d1 = s1 - large[j, 1]
            d2 = s2 - large[j, 2]
            v = d0 * d0 + d1 * d1 + d2 * d2
            w[e] = v
            c[e] = np.int64(np.rint(v / unit)) * scale
    return w, c


@_jit
def row_minima(indptr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Smallest value per CSR row (``inf`` for a row without edges)."""
    n_rows = indptr.shape[0] - 1
    out = np.full(n_rows, np.inf)
    for i in range(n_rows):
        for e in range(indptr[i], indptr[i + 1]):
            out[i] = min(out[i], values[e])
    return out

