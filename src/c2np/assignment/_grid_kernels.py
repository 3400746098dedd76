"""Compiled uniform-grid kernels of :mod:`c2np.assignment.grid` (numba): grid build,
(weighted) k-nearest and radius queries, the far-query routing.

Imported on first use (it imports numba); the machine code is cached on disk beside this
file (or in ``NUMBA_CACHE_DIR``) where a cache folder is writable.
"""

from __future__ import annotations

import numpy as np

from c2np._jit import _jit


# ----------------------------------------------------------------------------------------
# Uniform grid and (weighted) k-nearest queries
# ----------------------------------------------------------------------------------------
@_jit
def bounds(points: np.ndarray):
    """``(lo (3,), hi (3,), largest |coordinate|)`` of ``points`` (n >= 1, 3)."""
    lo = points[0].copy()
    hi = points[0].copy()
    amax = 0.0
    for i in range(points.shape[0]):
        for d in range(3):
            v = points[i, d]
            lo[d] = min(lo[d], v)
            hi[d] = max(hi[d], v)
            amax = max(amax, abs(v))
    return lo, hi, amax


@_jit
def occupied_cells(points: np.ndarray, origin: np.ndarray, h: float, dims: np.ndarray) -> int:
    """Number of distinct cells of side ``h`` (the grid ``dims`` from ``origin``) holding a point."""
    nx, ny, nz = dims[0], dims[1], dims[2]
    seen = np.zeros(nx * ny * nz, dtype=np.bool_)
    count = 0
    for i in range(points.shape[0]):
        ix = min(max(int(np.floor((points[i, 0] - origin[0]) / h)), 0), nx - 1)
        iy = min(max(int(np.floor((points[i, 1] - origin[1]) / h)), 0), ny - 1)
        iz = min(max(int(np.floor((points[i, 2] - origin[2]) / h)), 0), nz - 1)
        c = (ix * ny + iy) * nz + iz
        if not seen[c]:
            seen[c] = True
            count += 1
    return count


@_jit
def centroid_rms(points: np.ndarray):
    """``(centroid (3,), RMS distance from it)`` of ``points`` (n >= 1, 3), two passes."""
    n = points.shape[0]
    c = np.zeros(3)
    for i in range(n):
        for d in range(3):
            c[d] += points[i, d]
    for d in range(3):
        c[d] /= n
    acc = 0.0
    for i in range(n):
        for d in range(3):
            v = points[i, d] - c[d]
            acc += v * v
    return c, np.sqrt(acc / n)


@_jit
def far_queries(queries: np.ndarray, cell_start: np.ndarray, origin: np.ndarray, h: float,
                dims: np.ndarray, reach: int) -> np.ndarray:
    """(m,) True for queries whose nearest grid point is at least ``reach`` cells away: outside
    the grid's box widened by ``h``, or in a cell whose ``(2 reach + 1)³`` block of cells holds
    no point (a ring search from there crosses many empty cells). A routing choice, never a
    result: both searches are exact."""
    nx, ny, nz = dims[0], dims[1], dims[2]
    m = queries.shape[0]
    out = np.zeros(m, dtype=np.bool_)
    for qi in range(m):
        f0 = (queries[qi, 0] - origin[0]) / h
        f1 = (queries[qi, 1] - origin[1]) / h
        f2 = (queries[qi, 2] - origin[2]) / h
        if f0 < -1.0 or f1 < -1.0 or f2 < -1.0 or f0 >= nx + 1.0 or f1 >= ny + 1.0 or f2 >= nz + 1.0:
            out[qi] = True
            continue
        c0 = min(max(int(np.floor(f0)), 0), nx - 1)
        c1 = min(max(int(np.floor(f1)), 0), ny - 1)
        c2 = min(max(int(np.floor(f2)), 0), nz - 1)
        z0 = max(c2 - reach, 0)
        z1 = min(c2 + reach, nz - 1)
        empty = True
        for a in range(max(c0 - reach, 0), min(c0 + reach, nx - 1) + 1):
            for b in range(max(c1 - reach, 0), min(c1 + reach, ny - 1) + 1):
                base = (a * ny + b) * nz  # cells z0..z1 of column (a, b) are contiguous
                if cell_start[base + z1 + 1] > cell_start[base + z0]:
                    empty = False
                    break
            if not empty:
                break
        out[qi] = empty
    return out


@_jit
def grid_build(points: np.ndarray, origin: np.ndarray, h: float, dims: np.ndarray):
    """Sort ``points`` (n, 3) into cubic cells of side ``h`` (Å) starting at ``origin``.

    Returns ``(order, cell_start)``: ``order`` lists the points cell by cell (cell id
    ``(ix · ny + iy) · nz + iz``), ``cell_start`` (n_cells + 1,) the offsets.
    """
    n = points.shape[0]
    nx, ny, nz = dims[0], dims[1], dims[2]
    cid = np.empty(n, dtype=np.int64)
    counts = np.zeros(nx * ny * nz + 1, dtype=np.int64)
    for i in range(n):
        ix = min(max(int((points[i, 0] - origin[0]) / h), 0), nx - 1)
        iy = min(max(int((points[i, 1] - origin[1]) / h), 0), ny - 1)
        iz = min(max(int((points[i, 2] - origin[2]) / h), 0), nz - 1)
        c = (ix * ny + iy) * nz + iz
        cid[i] = c
        counts[c + 1] += 1
    for c in range(nx * ny * nz):
        counts[c + 1] += counts[c]
    fill = counts[:-1].copy()
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        order[fill[cid[i]]] = i
        fill[cid[i]] += 1
    return order, counts


@_jit
def grid_knn(points: np.ndarray, order: np.ndarray, cell_start: np.ndarray,
             origin: np.ndarray, h: float, dims: np.ndarray, weights: np.ndarray,
             queries: np.ndarray, k: int, bound: np.ndarray,
             slack: float):
    """For every query q, the k points j with the smallest ``|q − p_j|² + w_j`` (exact).

    ``weights`` (n,) >= 0 (zeros: plain k nearest neighbours). Only values below
    ``bound[q]`` are looked for (``inf``: no bound). Returns ``(values, index)`` of shape
    (m, k), ascending; missing entries have value ``inf`` and index -1. Cells are visited
    in Chebyshev rings around the query's cell; a cell is skipped when its box distance²
    plus its smallest weight cannot beat the current k-th value; the search stops when
    the ring's distance² reaches it. Cell boxes are widened by ``slack`` (Å) against the
    rounding of the cell assignment.
    """
    m = queries.shape[0]
    nx, ny, nz = dims[0], dims[1], dims[2]
    ncell = nx * ny * nz
    # smallest weight per cell
    cw = np.full(ncell, np.inf)
    for c in range(ncell):
        for t in range(cell_start[c], cell_start[c + 1]):
            w = weights[order[t]]
            cw[c] = min(cw[c], w)
    vals = np.full((m, k), np.inf)
    idx = np.full((m, k), -1, dtype=np.int64)
    rmax = max(nx, max(ny, nz))
    for qi in range(m):
        q0 = queries[qi, 0]
        q1 = queries[qi, 1]
        q2 = queries[qi, 2]
        f0 = (q0 - origin[0]) / h
        f1 = (q1 - origin[1]) / h
        f2 = (q2 - origin[2]) / h
        c0 = min(max(int(np.floor(f0)), 0), nx - 1)
        c1 = min(max(int(np.floor(f1)), 0), ny - 1)
        c2 = min(max(int(np.floor(f2)), 0), nz - 1)
        p0 = min(max(q0, origin[0]), origin[0] + nx * h)
        p1 = min(max(q1, origin[1]), origin[1] + ny * h)
        p2 = min(max(q2, origin[2]), origin[2] + nz * h)
        off2 = max(np.sqrt((q0 - p0) ** 2 + (q1 - p1) ** 2 + (q2 - p2) ** 2) - slack, 0.0) ** 2
        kth = bound[qi]
        filled = 0
        for r in range(rmax + 1):
            # distance from q' (q clamped into the grid's box) to the outside of the cube
            # of cells within r - 1 of c; every point x of the box has
            # |q - x|² >= |q - q'|² + |q' - x|² (projection onto a convex set)
            if r > 0:
                lo0 = (c0 - r + 1) * h + origin[0]
                hi0 = (c0 + r) * h + origin[0]
                lo1 = (c1 - r + 1) * h + origin[1]
                hi1 = (c1 + r) * h + origin[1]
                lo2 = (c2 - r + 1) * h + origin[2]
                hi2 = (c2 + r) * h + origin[2]
                inner = min(min(p0 - lo0, hi0 - p0), min(min(p1 - lo1, hi1 - p1),
                                                          min(p2 - lo2, hi2 - p2))) - slack
                if inner > 0 and off2 + inner * inner >= kth:
                    break
                if c0 - r < 0 and c0 + r >= nx and c1 - r < 0 and c1 + r >= ny \
                        and c2 - r < 0 and c2 + r >= nz:
                    break
            for a in range(max(c0 - r, 0), min(c0 + r, nx - 1) + 1):
                ea = abs(a - c0) == r
                b0 = max(c1 - r, 0)
                b1 = min(c1 + r, ny - 1)
                for b in range(b0, b1 + 1):
                    eb = ea or abs(b - c1) == r
                    if eb:
                        zlo = max(c2 - r, 0)
                        zhi = min(c2 + r, nz - 1)
                        zstep = 1
                    else:
                        zlo = c2 - r
                        zhi = c2 + r
                        zstep = 2 * r if r > 0 else 1
                    z = zlo
                    while z <= zhi:
                        if 0 <= z < nz:
                            c = (a * ny + b) * nz + z
                            if cell_start[c] < cell_start[c + 1]:
                                g0 = max(origin[0] + a * h - q0 - slack, 0.0,
                                         q0 - origin[0] - (a + 1) * h - slack)
                                g1 = max(origin[1] + b * h - q1 - slack, 0.0,
                                         q1 - origin[1] - (b + 1) * h - slack)
                                g2 = max(origin[2] + z * h - q2 - slack, 0.0,
                                         q2 - origin[2] - (z + 1) * h - slack)
                                if g0 * g0 + g1 * g1 + g2 * g2 + cw[c] < kth:
                                    for t in range(cell_start[c], cell_start[c + 1]):
                                        j = order[t]
                                        d0 = points[j, 0] - q0
                                        d1 = points[j, 1] - q1
                                        d2 = points[j, 2] - q2
                                        v = d0 * d0 + d1 * d1 + d2 * d2 + weights[j]
                                        if v < kth:
                                            # insert into the sorted top-k
                                            s = min(filled, k - 1)
                                            while s > 0 and vals[qi, s - 1] > v:
                                                vals[qi, s] = vals[qi, s - 1]
                                                idx[qi, s] = idx[qi, s - 1]
                                                s -= 1
                                            vals[qi, s] = v
                                            idx[qi, s] = j
                                            if filled < k:
                                                filled += 1
                                            if filled == k:
                                                kth = min(kth, vals[qi, k - 1])
                        z += zstep
    return vals, idx


@_jit
def grid_min_weighted(sp: np.ndarray, sw: np.ndarray, cw: np.ndarray, order: np.ndarray,
                      cell_start: np.ndarray, origin: np.ndarray, h: float, dims: np.ndarray,
                      queries: np.ndarray, bound: np.ndarray, slack: float):
    """For every query the smallest ``|q − p_j|² + w_j`` (w >= 0) below ``bound[q]`` and its
    point (``inf`` and -1 where none is below), exact: a ring search over the grid's cells
    around the query's cell (``sp``, ``sw``: points and weights in cell order, ``cw``: smallest
    weight per cell), a cell skipped when its box distance² plus its smallest weight cannot
    beat the best so far. With zero weights and an infinite bound it is the plain nearest
    neighbour (``c2np.assignment.nearest_neighbours``; among equally near points the first
    one visited)."""
    m = queries.shape[0]
    nx, ny, nz = dims[0], dims[1], dims[2]
    best = np.full(m, np.inf)
    idx = np.full(m, -1, dtype=np.int64)
    rmax = max(nx, max(ny, nz))
    for qi in range(m):
        q0 = queries[qi, 0]
        q1 = queries[qi, 1]
        q2 = queries[qi, 2]
        c0 = min(max(int(np.floor((q0 - origin[0]) / h)), 0), nx - 1)
        c1 = min(max(int(np.floor((q1 - origin[1]) / h)), 0), ny - 1)
        c2 = min(max(int(np.floor((q2 - origin[2]) / h)), 0), nz - 1)
        p0 = min(max(q0, origin[0]), origin[0] + nx * h)
        p1 = min(max(q1, origin[1]), origin[1] + ny * h)
        p2 = min(max(q2, origin[2]), origin[2] + nz * h)
        off2 = max(np.sqrt((q0 - p0) ** 2 + (q1 - p1) ** 2 + (q2 - p2) ** 2) - slack, 0.0) ** 2
        kth = bound[qi]
        bj = -1
        for r in range(rmax + 1):
            if r > 0:
                inner = min(min(p0 - ((c0 - r + 1) * h + origin[0]), (c0 + r) * h + origin[0] - p0),
                            min(min(p1 - ((c1 - r + 1) * h + origin[1]), (c1 + r) * h + origin[1] - p1),
                                min(p2 - ((c2 - r + 1) * h + origin[2]), (c2 + r) * h + origin[2] - p2))) - slack
                if inner > 0 and off2 + inner * inner >= kth:
                    break
                if c0 - r < 0 and c0 + r >= nx and c1 - r < 0 and c1 + r >= ny \
                        and c2 - r < 0 and c2 + r >= nz:
                    break
            for a in range(max(c0 - r, 0), min(c0 + r, nx - 1) + 1):
                ea = abs(a - c0) == r
                g0 = max(origin[0] + a * h - q0 - slack, 0.0, q0 - origin[0] - (a + 1) * h - slack)
                for b in range(max(c1 - r, 0), min(c1 + r, ny - 1) + 1):
                    eb = ea or abs(b - c1) == r
                    g1 = max(origin[1] + b * h - q1 - slack, 0.0, q1 - origin[1] - (b + 1) * h - slack)
                    gab = g0 * g0 + g1 * g1
                    if gab >= kth:
                        continue
                    if eb:
                        zlo = max(c2 - r, 0)
                        zhi = min(c2 + r, nz - 1)
                        zstep = 1
                    else:
                        zlo = c2 - r
                        zhi = c2 + r
                        zstep = 2 * r if r > 0 else 1
                    z = zlo
                    while z <= zhi:
                        if 0 <= z < nz:
                            c = (a * ny + b) * nz + z
                            t0 = cell_start[c]
                            t1 = cell_start[c + 1]
                            if t0 < t1:
                                g2 = max(origin[2] + z * h - q2 - slack, 0.0,
                                         q2 - origin[2] - (z + 1) * h - slack)
                                if gab + g2 * g2 + cw[c] < kth:
                                    for t in range(t0, t1):
                                        d0 = sp[t, 0] - q0
                                        d1 = sp[t, 1] - q1
                                        d2 = sp[t, 2] - q2
                                        v = d0 * d0 + d1 * d1 + d2 * d2 + sw[t]
                                        if v < kth:
                                            kth = v
                                            bj = t
                        z += zstep
        if bj >= 0:
            best[qi] = kth
            idx[qi] = order[bj]
    return best, idx



@_jit
def _home_cell(q0: float, q1: float, q2: float, origin: np.ndarray, h: float,
               dims: np.ndarray):
    a = min(max(int(np.floor((q0 - origin[0]) / h)), 0), dims[0] - 1)
    b = min(max(int(np.floor((q1 - origin[1]) / h)), 0), dims[1] - 1)
    c = min(max(int(np.floor((q2 - origin[2]) / h)), 0), dims[2] - 1)
    inside = (origin[0] <= q0 < origin[0] + dims[0] * h and origin[1] <= q1 < origin[1] + dims[1] * h
              and origin[2] <= q2 < origin[2] + dims[2] * h)
    return a, b, c, inside


@_jit
def radius_pairs(sp: np.ndarray, order: np.ndarray, cell_start: np.ndarray,
                 origin: np.ndarray, h: float, dims: np.ndarray, queries: np.ndarray,
                 r2: float):
    """All (query i, point j) with ``|q_i − p_j|² < r2``, as CSR by query ``(indptr,
    indices)``; ``sp`` are the points in cell order (``sp[t] = points[order[t]]``). The grid's
    cell side ``h`` must be >= sqrt(r2): the 27 cells around a
    query's home cell hold every partner (queries outside the grid are clamped to it,
    which keeps that true). One branch-free pass into a buffer sized by the candidates of
    a block of queries, then compacted."""
    m = queries.shape[0]
    nx, ny, nz = dims[0], dims[1], dims[2]
    indptr = np.zeros(m + 1, dtype=np.int64)
    cap = 1024
    buf = np.empty(cap, dtype=np.int64)
    out = np.empty(max(16 * m, 16), dtype=np.int64)
    n_out = 0
    for i in range(m):
        q0 = queries[i, 0]
        q1 = queries[i, 1]
        q2 = queries[i, 2]
        a, b, c, _ = _home_cell(q0, q1, q2, origin, h, dims)
        a0 = max(a - 1, 0)
        a1 = min(a + 1, nx - 1)
        b0 = max(b - 1, 0)
        b1 = min(b + 1, ny - 1)
        c0 = max(c - 1, 0)
        c1 = min(c + 1, nz - 1)
        n_cand = 0
        for da in range(a0, a1 + 1):
            for db in range(b0, b1 + 1):
                base = (da * ny + db) * nz
                n_cand += cell_start[base + c1 + 1] - cell_start[base + c0]
        if n_cand > cap:
            cap = 2 * n_cand
            buf = np.empty(cap, dtype=np.int64)
        n_found = 0
        for da in range(a0, a1 + 1):
            for db in range(b0, b1 + 1):
                base = (da * ny + db) * nz
                for t in range(cell_start[base + c0], cell_start[base + c1 + 1]):
                    d0 = sp[t, 0] - q0
                    d1 = sp[t, 1] - q1
                    d2 = sp[t, 2] - q2
                    buf[n_found] = order[t]
                    n_found += d0 * d0 + d1 * d1 + d2 * d2 < r2
        if n_out + n_found > out.shape[0]:
            grown = np.empty(2 * (n_out + n_found), dtype=np.int64)
            grown[:n_out] = out[:n_out]
            out = grown
        out[n_out:n_out + n_found] = buf[:n_found]
        n_out += n_found
        indptr[i + 1] = n_out
    return indptr, out[:n_out].copy()


@_jit
def cell_weights(order: np.ndarray, cell_start: np.ndarray, weights: np.ndarray):
    """Weights in cell order and the smallest weight per cell (``inf`` when empty)."""
    ncell = cell_start.shape[0] - 1
    sw = np.empty(order.shape[0])
    cw = np.full(ncell, np.inf)
    for c in range(ncell):
        for t in range(cell_start[c], cell_start[c + 1]):
            w = weights[order[t]]
            sw[t] = w
            cw[c] = min(cw[c], w)
    return sw, cw


@_jit
def offset_knn(sp: np.ndarray, order: np.ndarray, cell_start: np.ndarray,
               origin: np.ndarray, h: float, dims: np.ndarray, sw: np.ndarray,
               cw: np.ndarray, offsets: np.ndarray, off_d2: np.ndarray,
               queries: np.ndarray, k: int, bound: np.ndarray):
    """Like :func:`grid_knn` (the k smallest ``|q − p_j|² + w_j`` below ``bound``; ``sp``,
    ``sw``: points and weights in cell order, ``cw``: smallest weight per cell), visiting
    the home cell plus ``offsets`` (n_off, 3), sorted by ``off_d2``, the smallest squared
    distance between a point of the home cell and a point of the offset cell. Returns
    ``(values, index, complete)``; ``complete[i]`` is False when the list ran out before
    the search could stop (the caller then asks :func:`grid_knn`) or the query lies
    outside the grid."""
    m = queries.shape[0]
    nx, ny, nz = dims[0], dims[1], dims[2]
    n_off = offsets.shape[0]
    vals = np.full((m, k), np.inf)
    idx = np.full((m, k), -1, dtype=np.int64)
    complete = np.ones(m, dtype=np.bool_)
    reach = 0
    for o in range(n_off):
        reach = max(reach, abs(offsets[o, 0]), abs(offsets[o, 1]), abs(offsets[o, 2]))
    for qi in range(m):
        q0 = queries[qi, 0]
        q1 = queries[qi, 1]
        q2 = queries[qi, 2]
        a, b, c, inside = _home_cell(q0, q1, q2, origin, h, dims)
        if not inside:
            complete[qi] = False
            continue
        kth = bound[qi]
        filled = 0
        stopped = False
        for o in range(n_off):
            if off_d2[o] >= kth:
                stopped = True
                break
            xa = a + offsets[o, 0]
            xb = b + offsets[o, 1]
            xc = c + offsets[o, 2]
            if xa < 0 or xa >= nx or xb < 0 or xb >= ny or xc < 0 or xc >= nz:
                continue
            cell = (xa * ny + xb) * nz + xc
            if off_d2[o] + cw[cell] >= kth:
                continue
            for t in range(cell_start[cell], cell_start[cell + 1]):
                d0 = sp[t, 0] - q0
                d1 = sp[t, 1] - q1
                d2 = sp[t, 2] - q2
                v = d0 * d0 + d1 * d1 + d2 * d2 + sw[t]
                if v < kth:
                    s = min(filled, k - 1)
                    while s > 0 and vals[qi, s - 1] > v:
                        vals[qi, s] = vals[qi, s - 1]
                        idx[qi, s] = idx[qi, s - 1]
                        s -= 1
                    vals[qi, s] = v
                    idx[qi, s] = order[t]
                    if filled < k:
                        filled += 1
                    if filled == k:
                        kth = min(kth, vals[qi, k - 1])
        if not stopped and not (a - reach <= 0 and a + reach >= nx - 1 and b - reach <= 0
                                and b + reach >= ny - 1 and c - reach <= 0
                                and c + reach >= nz - 1):
            complete[qi] = False  # cells beyond the offsets were not visited
    return vals, idx, complete
