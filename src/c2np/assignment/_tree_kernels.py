"""Compiled k-d tree with tight boxes (numba): nearest and k nearest neighbours of queries
far from compact point sets, where a grid's ring search would cross many empty cells.

Imported on first use (it imports numba); the machine code is cached on disk beside this
file (or in ``NUMBA_CACHE_DIR``) where a cache folder is writable.
"""

from __future__ import annotations

import numpy as np

from c2np._jit import _jit


@_jit
def _select(points: np.ndarray, axis: int, perm: np.ndarray, s0: int, s1: int, k: int) -> None:
    """Reorder ``perm[s0:s1]`` so that ``perm[k]`` has the k-th smallest coordinate on
    ``axis``, none before it larger and none after it smaller (quickselect, middle pivot)."""
    a = s0
    b = s1 - 1
    while a < b:
        pivot = points[perm[(a + b) // 2], axis]
        i = a
        j = b
        while i <= j:
            while points[perm[i], axis] < pivot:
                i += 1
            while points[perm[j], axis] > pivot:
                j -= 1
            if i <= j:
                t = perm[i]
                perm[i] = perm[j]
                perm[j] = t
                i += 1
                j -= 1
        if k <= j:
            b = j
        elif k >= i:
            a = i
        else:
            return


@_jit
def kdtree_build(points: np.ndarray, leaf_size: int):
    """A k-d tree of ``points`` (n >= 1, 3): median splits on the widest axis of each
    node's points, leaves of at most ``leaf_size`` points, every node's box the tight
    bounding box of its points (not the split planes: far queries prune better).

    Returns ``(perm (n,), sorted points (n, 3), box_lo (k, 3), box_hi (k, 3), start (k,),
    end (k,), left (k,))``: node t holds ``perm[start[t]:end[t]]``; its children are
    ``left[t]`` and ``left[t] + 1`` (-1 for a leaf); node 0 is the root.
    """
    n = points.shape[0]
    cap = 2 * (n // max(leaf_size, 1) + 1) * 2 + 1
    perm = np.arange(n)
    lo = np.empty((cap, 3))
    hi = np.empty((cap, 3))
    start = np.empty(cap, dtype=np.int64)
    end = np.empty(cap, dtype=np.int64)
    left = np.full(cap, -1, dtype=np.int64)
    start[0] = 0
    end[0] = n
    n_nodes = 1
    stack = np.empty(cap, dtype=np.int64)
    stack[0] = 0
    top = 1
    while top > 0:
        top -= 1
        t = stack[top]
        s0 = start[t]
        s1 = end[t]
        for d in range(3):
            lo[t, d] = points[perm[s0], d]
            hi[t, d] = points[perm[s0], d]
        for u in range(s0, s1):
            for d in range(3):
                v = points[perm[u], d]
                lo[t, d] = min(lo[t, d], v)
                hi[t, d] = max(hi[t, d], v)
        if s1 - s0 <= leaf_size:
            continue
        axis = 0
        for d in range(1, 3):
            if hi[t, d] - lo[t, d] > hi[t, axis] - lo[t, axis]:
                axis = d
        mid = (s0 + s1) // 2
        _select(points, axis, perm, s0, s1, mid)
        c = n_nodes
        n_nodes += 2
        left[t] = c
        start[c] = s0
        end[c] = mid
        start[c + 1] = mid
        end[c + 1] = s1
        stack[top] = c
        stack[top + 1] = c + 1
        top += 2
    sp = np.empty((n, 3))
    for u in range(n):
        for d in range(3):
            sp[u, d] = points[perm[u], d]
    return (perm, sp, lo[:n_nodes].copy(), hi[:n_nodes].copy(), start[:n_nodes].copy(),
            end[:n_nodes].copy(), left[:n_nodes].copy())


@_jit
def _box_d2(q0: float, q1: float, q2: float, lo: np.ndarray, hi: np.ndarray, t: int) -> float:
    g0 = max(lo[t, 0] - q0, 0.0, q0 - hi[t, 0])
    g1 = max(lo[t, 1] - q1, 0.0, q1 - hi[t, 1])
    g2 = max(lo[t, 2] - q2, 0.0, q2 - hi[t, 2])
    return g0 * g0 + g1 * g1 + g2 * g2


@_jit
def kdtree_nearest(perm: np.ndarray, sp: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   start: np.ndarray, end: np.ndarray, left: np.ndarray, queries: np.ndarray):
    """Exact nearest neighbour of every query (m, 3) in a :func:`kdtree_build` tree:
    ``(squared distances (m,), indices (m,))``, the squares ``dx² + dy² + dz²`` in float64
    in that order (so ``sqrt`` of them equals ``cKDTree.query``'s distances and the grid
    search's). Depth first, the nearer child first; a node is skipped when its box's
    squared distance, computed in the same order, is not below the best so far (rounding
    is monotone, so it never exceeds the computed square of a point inside the box: the
    pruning is exact). Among equally near points the first one visited."""
    m = queries.shape[0]
    best = np.full(m, np.inf)
    idx = np.full(m, -1, dtype=np.int64)
    stack = np.empty(256, dtype=np.int64)
    bj_prev = 0
    for qi in range(m):
        q0 = queries[qi, 0]
        q1 = queries[qi, 1]
        q2 = queries[qi, 2]
        kth = np.inf
        bj = -1
        if qi > 0:  # warm start: the previous query's neighbour (queries come in space order)
            u = bj_prev
            d0 = sp[u, 0] - q0
            d1 = sp[u, 1] - q1
            d2 = sp[u, 2] - q2
            kth = d0 * d0 + d1 * d1 + d2 * d2
            bj = u
        stack[0] = 0
        top = 1
        while top > 0:
            top -= 1
            t = stack[top]
            if _box_d2(q0, q1, q2, lo, hi, t) >= kth:
                continue
            c = left[t]
            if c < 0:
                for u in range(start[t], end[t]):
                    d0 = sp[u, 0] - q0
                    d1 = sp[u, 1] - q1
                    d2 = sp[u, 2] - q2
                    v = d0 * d0 + d1 * d1 + d2 * d2
                    if v < kth:
                        kth = v
                        bj = u
                continue
            da = _box_d2(q0, q1, q2, lo, hi, c)
            db = _box_d2(q0, q1, q2, lo, hi, c + 1)
            if da <= db:
                if db < kth:
                    stack[top] = c + 1
                    top += 1
                if da < kth:
                    stack[top] = c
                    top += 1
            else:
                if da < kth:
                    stack[top] = c
                    top += 1
                if db < kth:
                    stack[top] = c + 1
                    top += 1
        best[qi] = kth
        idx[qi] = perm[bj]
        bj_prev = bj
    return best, idx


@_jit
def kdtree_knn(perm: np.ndarray, sp: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               start: np.ndarray, end: np.ndarray, left: np.ndarray, queries: np.ndarray,
               k: int):
    """The ``k`` nearest points (exact) of every query (m, 3) in a :func:`kdtree_build`
    tree (``k`` at most the tree's points): ``(squared distances (m, k), indices (m, k))``,
    ascending, the squares computed as in :func:`kdtree_nearest`. Depth first, the nearer
    child first; a node is skipped when its box is not nearer than the k-th best so far.
    Among equally near points the first ones visited. The traversal is
    :func:`kdtree_nearest`'s, written out again on purpose: with the child push in a shared
    jitted helper (also ``inline="always"``) the far queries measured 25-40 % slower."""
    m = queries.shape[0]
    best = np.full((m, k), np.inf)
    idx = np.full((m, k), -1, dtype=np.int64)
    stack = np.empty(256, dtype=np.int64)
    bv = np.empty(k)
    bj = np.empty(k, dtype=np.int64)
    for qi in range(m):
        q0 = queries[qi, 0]
        q1 = queries[qi, 1]
        q2 = queries[qi, 2]
        for s in range(k):
            bv[s] = np.inf
            bj[s] = -1
        stack[0] = 0
        top = 1
        while top > 0:
            top -= 1
            t = stack[top]
            kth = bv[k - 1]
            if _box_d2(q0, q1, q2, lo, hi, t) >= kth:
                continue
            c = left[t]
            if c < 0:
                for u in range(start[t], end[t]):
                    d0 = sp[u, 0] - q0
                    d1 = sp[u, 1] - q1
                    d2 = sp[u, 2] - q2
                    v = d0 * d0 + d1 * d1 + d2 * d2
                    if v < bv[k - 1]:  # insert, keeping bv ascending
                        s = k - 1
                        while s > 0 and bv[s - 1] > v:
                            bv[s] = bv[s - 1]
                            bj[s] = bj[s - 1]
                            s -= 1
                        bv[s] = v
                        bj[s] = u
                continue
            da = _box_d2(q0, q1, q2, lo, hi, c)
            db = _box_d2(q0, q1, q2, lo, hi, c + 1)
            if da <= db:
                if db < kth:
                    stack[top] = c + 1
                    top += 1
                if da < kth:
                    stack[top] = c
                    top += 1
            else:
                if da < kth:
                    stack[top] = c
                    top += 1
                if db < kth:
                    stack[top] = c + 1
                    top += 1
        for s in range(k):
            best[qi, s] = bv[s]
            idx[qi, s] = perm[bj[s]] if bj[s] >= 0 else -1
    return best, idx
