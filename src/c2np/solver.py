"""The crystallographic inverse solver (task 2 reference, SPEC §7 and §9).

Given a finite particle (species and Cartesian positions in any frame and any order),
recover the bulk crystal it was cut from: lattice parameters of the standardized
conventional cell, space group, and the reconstructed unit cell.

Algorithm (details and limits in ``docs/solver.md``):

1. *Bounds.* The in-particle region is the convex hull of the atoms shrunk by
   ``boundary_margin_angstrom`` (small clean particles: by the measured noise). A translated
   atom is only asked to land on an atom when its image lies in that region, so atoms whose
   images fall outside the particle never count against a translation.
2. *Translations.* Candidate vectors are differences between atoms of the rarest element
   (origins: the few closest to the centre; in small particles all elements contribute).
   Each candidate ``t`` is scored on the central probe atoms of every element: the images
   ``x ± t`` inside the region must land on an atom of the same element (``cKDTree``), and
   their mean squared residual must match the best candidate's within sampling error (a
   true lattice vector leaves pure noise; a pseudo-translation of a distorted structure
   leaves the distortion too). Candidates are scored in order of length until three
   independent accepted vectors are found and a margin beyond them is covered (twice their
   length when they leave a residual: a superstructure's sub-cell). Near-duplicate
   candidates are merged by distance; "closest k atoms" cuts take whole distance shells, so
   no step depends on the frame or the atom order. Small particles whose lattice leaves a
   residual are searched again exactly (every image in the hull, two images suffice); when
   only two translations are well supported, the third is the one-pair translation whose
   folded crystal is uniquely the most symmetric (with the particle's composition).
3. *Lattice.* The shortest three independent accepted vectors form the basis. An accepted
   vector that is not an integer combination of them is checked through the short vectors
   it implies and dropped if they fail; otherwise a search over triples finds the finer
   lattice. The basis is refined by least squares over all accepted translations and
   Niggli-reduced (moyopy).
4. *Sites.* Every atom is folded into the cell and clustered per element with periodic
   distances (every cluster is kept). The lattice and the Cartesian site offsets are then
   refined jointly by linear least squares (``x_i = c_site + n_i · L``) over all assigned
   atoms; atoms are reassigned to their nearest site if any moved off, and refitted.
5. *Symmetry.* moyopy runs over a sweep of tolerances from tight to loose, starting at a
   noise floor estimated from the site scatter. The answer is the space group of the
   tightest *plateau* (the first group found at two consecutive tolerances). The result
   is moyopy's standardized (idealized) conventional cell at the tightest tolerance of
   that plateau. Sites absent from a small particle are restored by symmetry (lattice
   rotations under which all other sites map onto sites) when that raises the symmetry.
6. *Confidence* = explained fraction (atoms that sit on a reconstructed site) x stability
   of the space group over the sweep (plateau length / ``stable_plateau``) x repeat support
   (median copies of a site in the particle, (m - 1) / 3 capped at 1) x consistency of the
   accepted translations x site fit (atoms scatter about their sites no more than the
   translation residuals predict) x completeness (sites seen, not restored; halved for a
   low-support lattice). A particle that is not one crystal gets either an error
   or a low confidence.

Independent of the particle's position, orientation and atom order (up to floating-point
rounding). Bad input (too few atoms, non-finite positions, no lattice) raises
:class:`~c2np.errors.C2NPInputError`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from c2np.cells import UnitCell, crystal_system, lattice_parameters
from c2np.errors import C2NPInputError, C2NPNoAnswerError
from c2np.limits import check as check_limit

__all__ = ["SolverResult", "solve", "solve_particle", "DEFAULT_SYMPREC_SWEEP_ANGSTROM"]

#: Tolerances (Å) tried by the symmetry sweep, tight to loose.
DEFAULT_SYMPREC_SWEEP_ANGSTROM: tuple[float, ...] = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.45)

_ELEMENT_KEY = 1.0e4  # 4th coordinate per atomic number: nearest neighbours stay within an element


@dataclass(frozen=True, eq=False)
class SolverResult:
    """What the solver recovered from a particle.

    Attributes:
        a_angstrom, b_angstrom, c_angstrom: standardized conventional lattice lengths (Å).
        alpha_deg, beta_deg, gamma_deg: standardized conventional angles (degrees).
        spacegroup: international space-group number 1..230.
        international: Hermann-Mauguin short symbol, e.g. ``Pm-3m``.
        crystal_system: e.g. ``cubic``.
        confidence: in [0, 1]; see the module docstring.
        cell: the reconstructed standardized conventional :class:`UnitCell`.
        primitive_lattice_angstrom: (3, 3) Niggli-reduced lattice found in the particle
            (rows, in the particle's own frame).
        symprec_angstrom: tolerance at which the space group was chosen.
        n_atoms: atoms in the particle.
        diagnostics: JSON-serialisable details (noise estimate, translations, sites, sweep).
    """

    a_angstrom: float
    b_angstrom: float
    c_angstrom: float
    alpha_deg: float
    beta_deg: float
    gamma_deg: float
    spacegroup: int
    international: str
    crystal_system: str
    confidence: float
    cell: UnitCell = field(repr=False)
    primitive_lattice_angstrom: np.ndarray = field(repr=False)
    symprec_angstrom: float = 0.0
    n_atoms: int = 0
    diagnostics: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def lattice_params(self) -> tuple[float, float, float, float, float, float]:
        """(a, b, c, alpha, beta, gamma) in Å and degrees."""
        return (self.a_angstrom, self.b_angstrom, self.c_angstrom,
                self.alpha_deg, self.beta_deg, self.gamma_deg)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form: keys a, b, c, alpha, beta, gamma, spacegroup, confidence
        first, then the symbol, system, tolerance, cells and diagnostics."""
        return {
            "a": self.a_angstrom, "b": self.b_angstrom, "c": self.c_angstrom,
            "alpha": self.alpha_deg, "beta": self.beta_deg, "gamma": self.gamma_deg,
            "spacegroup": self.spacegroup, "confidence": self.confidence,
            "international": self.international, "crystal_system": self.crystal_system,
            "symprec_angstrom": self.symprec_angstrom, "n_atoms": self.n_atoms,
            "primitive_lattice_angstrom": np.asarray(self.primitive_lattice_angstrom).tolist(),
            "cell": self.cell.to_dict(),
            "diagnostics": self.diagnostics,
        }


# --- helpers ----------------------------------------------------------------------------------
#: A particle whose median nearest-neighbour distance exceeds this (Å) is not a solid in Å.
MAX_TYPICAL_NEIGHBOUR_ANGSTROM = 10.0


def _validate(numbers: np.ndarray, positions: np.ndarray, min_atoms: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        nums = np.asarray(numbers).reshape(-1)
        pos = np.asarray(positions, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise C2NPInputError(f"solver input: cannot read species/positions as arrays ({exc})") from exc
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise C2NPInputError(f"solver input: positions must have shape (n, 3), got {pos.shape}")
    if len(nums) != len(pos):
        raise C2NPInputError(f"solver input: {len(nums)} species but {len(pos)} positions")
    if not np.all(np.isfinite(pos)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(pos), axis=1))[0])
        raise C2NPInputError(f"solver input: atom {bad} has a non-finite position")
    if not np.issubdtype(nums.dtype, np.integer):
        if not np.all(np.isfinite(nums.astype(float))) or np.any(nums != np.round(nums)):
            raise C2NPInputError("solver input: atomic numbers must be integers")
    nums = nums.astype(np.int64)
    if np.any(nums < 1) or np.any(nums > 118):
        raise C2NPInputError("solver input: atomic numbers must be in 1..118")
    from scipy.spatial import cKDTree

    check_limit("solver_atoms", len(nums), what="solver input")
    if len(nums) < min_atoms:
        raise C2NPNoAnswerError(f"solver input: {len(nums)} atoms is too few to find a lattice "
                                f"(at least {min_atoms} needed)")
    nearest, _ = cKDTree(pos).query(pos, k=2)
    typical = float(np.median(nearest[:, 1]))
    if typical > MAX_TYPICAL_NEIGHBOUR_ANGSTROM:
        raise C2NPInputError(f"solver input: atoms are typically {typical:.4g} Å from their nearest "
                             f"neighbour (a solid has neighbours within {MAX_TYPICAL_NEIGHBOUR_ANGSTROM:g} Å); "
                             "positions must be in Å")
    return nums, pos


@dataclass(frozen=True)
class _Bounds:
    """The particle's convex hull about its centroid, for in-particle tests.

    Attributes:
        equations: (F, 4) hull facets, ``n . x + d <= 0`` inside (unit normals).
        r_in: radius of the largest ball about the origin inside the hull (Å).
        r_out: largest distance of an atom from the origin (Å).
        margin: required clearance from the hull (Å).
    """

    equations: np.ndarray
    r_in: float
    r_out: float
    margin: float

    def inside(self, y: np.ndarray) -> np.ndarray:
        """(..., 3) points -> bool mask: at least ``margin`` inside the hull."""
        r2 = np.einsum("...k,...k->...", y, y)
        sure = r2 <= (self.r_in - self.margin) ** 2
        maybe = ~sure & (r2 <= (self.r_out - self.margin) ** 2)
        out = sure.copy()
        if maybe.any():
            pts = y[maybe]
            dist = pts @ self.equations[:, :3].T + self.equations[:, 3]
            out[maybe] = np.all(dist <= -self.margin, axis=-1)
        return out


def _bounds(rel: np.ndarray, r: np.ndarray, margin: float) -> _Bounds:
    """Hull of the atoms (positions relative to the centroid)."""
    from scipy.spatial import ConvexHull, QhullError

    outer = rel[r >= 0.75 * r.max()]  # hull(subset) lies inside hull(all): conservative
    pts = outer if len(outer) >= 8 else rel
    try:
        hull = ConvexHull(pts)
    except QhullError:
        try:
            hull = ConvexHull(rel)
        except QhullError as exc:
            raise C2NPNoAnswerError("solver input: the atoms are flat or collinear; a particle "
                                    "must extend in three dimensions") from exc
    eq = np.unique(np.round(np.asarray(hull.equations, dtype=float), 9), axis=0)  # coplanar facets once
    r_in = float(np.min(-eq[:, 3]))
    return _Bounds(eq, r_in, float(r.max()), float(margin))


def _whole_shells(r_sorted: np.ndarray, k: int, *, tol_angstrom: float = 1e-6) -> int:
    """Smallest k' >= k such that the first k' of ``r_sorted`` (ascending, Å) end a shell
    (the next value is more than ``tol_angstrom`` larger), so that a cut never splits atoms
    at equal distance (their order is the input's)."""
    k = int(min(max(k, 0), len(r_sorted)))
    while 0 < k < len(r_sorted) and r_sorted[k] - r_sorted[k - 1] <= tol_angstrom:
        k += 1
    return k


def _greedy_basis(vectors: np.ndarray, *, min_sin: float = 0.1) -> np.ndarray | None:
    """Shortest three linearly independent rows of ``vectors`` (sorted by length), or None."""
    if len(vectors) < 3:
        return None
    lengths = np.linalg.norm(vectors, axis=1)
    order = np.argsort(lengths, kind="stable")
    v = vectors[order]
    n = lengths[order]
    v1 = v[0]
    cross = np.linalg.norm(np.cross(v1, v), axis=1) / (n[0] * n)
    idx2 = np.flatnonzero(cross > min_sin)
    if len(idx2) == 0:
        return None
    v2 = v[idx2[0]]
    normal = np.cross(v1, v2)
    vol = np.abs(v @ normal) / (np.linalg.norm(normal) * n)
    idx3 = np.flatnonzero(vol > min_sin)
    if len(idx3) == 0:
        return None
    return np.array([v1, v2, v[idx3[0]]])


def _best_triple(vectors: np.ndarray, *, max_vectors: int = 14, int_tol: float = 0.12,
                 min_sin: float = 0.1) -> np.ndarray | None:
    """Smallest-volume triple among the shortest rows in which every row is integral."""
    from itertools import combinations

    lengths = np.linalg.norm(vectors, axis=1)
    short = vectors[np.argsort(lengths, kind="stable")[:max_vectors]]
    best: tuple[float, np.ndarray] | None = None
    for i, j, k in combinations(range(len(short)), 3):
        b = short[[i, j, k]]
        det = abs(float(np.linalg.det(b)))
        if det < min_sin * float(np.prod(np.linalg.norm(b, axis=1))):
            continue
        if best is not None and det >= best[0] - 1e-9:
            continue
        coef = vectors @ np.linalg.inv(b)
        if np.max(np.abs(coef - np.round(coef))) <= int_tol:
            best = (det, b)
    return None if best is None else best[1]


def _coset_representatives(vector: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """(27, 3) short vectors of the coset ``vector + Z^3 basis`` (fractional part shifted by
    -1, 0, +1 along each basis vector)."""
    coef = vector @ np.linalg.inv(basis)
    frac = coef - np.floor(coef)
    shifts = np.stack(np.meshgrid([-1, 0, 1], [-1, 0, 1], [-1, 0, 1], indexing="ij"), -1).reshape(-1, 3)
    return (frac[None, :] + shifts) @ basis


def _niggli(lattice: np.ndarray) -> np.ndarray:
    """Right-handed Niggli-reduced basis (moyopy); the input when reduction fails."""
    import moyopy

    try:
        red, _ = moyopy.niggli_reduce(np.asarray(lattice, dtype=float).tolist())
    except ValueError:
        return lattice
    return np.asarray(red, dtype=float)


def _min_image(df: np.ndarray) -> np.ndarray:
    return df - np.round(df)


def _cluster_sites(frac: np.ndarray, order: np.ndarray, lattice: np.ndarray,
                   radius_angstrom: float) -> tuple[np.ndarray, np.ndarray]:
    """Leader clustering of fractional points (periodic). Returns (labels, centres_frac)."""
    labels = np.full(len(frac), -1, dtype=np.int64)
    centres: list[np.ndarray] = []
    r2 = radius_angstrom ** 2
    for seed in order:
        if labels[seed] >= 0:
            continue
        free = labels < 0
        idx = np.flatnonzero(free)
        d = _min_image(frac[idx] - frac[seed])
        cart = d @ lattice
        near = np.einsum("ij,ij->i", cart, cart) <= r2
        centre = frac[seed] + d[near].mean(axis=0)
        d2 = _min_image(frac[idx] - centre)
        cart2 = d2 @ lattice
        near2 = np.einsum("ij,ij->i", cart2, cart2) <= r2
        if not near2.any():
            near2 = near
        else:
            centre = centre + d2[near2].mean(axis=0)
        labels[idx[near2]] = len(centres)
        labels[seed] = len(centres) if labels[seed] < 0 else labels[seed]
        centres.append(centre - np.floor(centre))
    return labels, np.array(centres).reshape(-1, 3)


@dataclass
class _Scores:
    vectors: list[np.ndarray] = field(default_factory=list)
    refined: list[np.ndarray] = field(default_factory=list)
    n_in: list[np.ndarray] = field(default_factory=list)
    n_elem: list[np.ndarray] = field(default_factory=list)
    residuals: list[np.ndarray] = field(default_factory=list)
    ms: list[np.ndarray] = field(default_factory=list)

    def cat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (np.concatenate(self.vectors), np.concatenate(self.refined),
                np.concatenate(self.n_in), np.concatenate(self.n_elem))

    def residual_list(self) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for block in self.residuals:
            out.extend(block)  # type: ignore[arg-type]
        return out


def _score_batch(cands: np.ndarray, probe_pos: np.ndarray, probe_key: np.ndarray, tree: Any,
                 positions4: np.ndarray, bounds: _Bounds, tol_loose: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray], np.ndarray]:
    """Score candidate translations: per candidate, the number of in-particle images, the
    number of distinct elements among them, the refined vector (mean matched displacement),
    the residual distances (inf where no same-element atom lies within ``tol_loose``) and
    the mean squared residual about the refined vector (Å²)."""
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
    ms = np.where(n_match > 0, sq / np.maximum(n_match, 1) - np.einsum("ij,ij->i", mean_shift, mean_shift),
                  np.inf)
    order = np.argsort(cand_id, kind="stable")
    dist_sorted = dist[order]
    splits = np.cumsum(n_in)[:-1]
    res_list = np.split(dist_sorted, splits)
    # distinct elements among the in-particle images: a vector joining two sites of one
    # sublattice maps that sublattice exactly, so images of one kind alone prove little
    seen = np.zeros((b, 119), dtype=bool)
    seen[cand_id, np.rint(keys / _ELEMENT_KEY).astype(np.int64)] = True
    n_elem = seen.sum(axis=1)
    return n_in, n_elem, refined, res_list, ms


def _symmetry_sweep(lattice: np.ndarray, frac: np.ndarray, numbers: np.ndarray,
                    tolerances: list[float], stable_plateau: int
                    ) -> tuple[list[tuple[float, int | None, Any]], tuple[float, int | None, Any], int]:
    """moyopy over tolerances (tight to loose). Returns (records, chosen record, plateau
    length): the chosen group is the first one found at two consecutive tolerances (at the
    tightest tolerance of its plateau); without any plateau, the most frequent group (ties: tighter)."""
    import moyopy

    moyo_cell = moyopy.Cell(lattice.tolist(), frac.tolist(), numbers.tolist())
    moyo_log = logging.getLogger("moyo")
    moyo_level = moyo_log.level
    moyo_log.setLevel(logging.ERROR)  # loose tolerances log symmetrization warnings
    records: list[tuple[float, int | None, Any]] = []
    chosen: int | None = None
    run_start = 0
    try:
        for sp in tolerances:
            try:
                ds = moyopy.MoyoDataset(moyo_cell, symprec=sp)
            except Exception:  # moyopy raises where no consistent group exists at sp
                ds = None
            records.append((sp, None if ds is None else int(ds.number), ds))
            k = len(records) - 1
            if not (k > 0 and records[k][1] is not None and records[k][1] == records[k - 1][1]):
                run_start = k
            run = k - run_start + 1
            if chosen is None and run >= 2:
                chosen = run_start
            if chosen is not None and (run_start != chosen or run >= stable_plateau):
                break
    finally:
        moyo_log.setLevel(moyo_level)
    if chosen is not None:
        j = chosen
        while j + 1 < len(records) and records[j + 1][1] == records[chosen][1]:
            j += 1
        plateau = j - chosen + 1
        return records, records[chosen], plateau
    found = [rec for rec in records if rec[1] is not None]
    if not found:
        raise C2NPNoAnswerError("solver input: no space group could be assigned to the "
                                "reconstructed cell at any tolerance")
    sgs = [rec[1] for rec in found]
    best = max(sgs, key=lambda g: (sgs.count(g), -sgs.index(g)))
    return records, next(rec for rec in found if rec[1] == best), 1


def _complete_sites(lattice: np.ndarray, frac: np.ndarray, numbers: np.ndarray, *,
                    tol_angstrom: float, max_missing: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Sites absent from a small particle, restored by symmetry.

    Each rotation of the lattice's point group is paired with the translations that map one
    site of the rarest species onto another; an operation under which every site but at
    most ``max_missing`` lands on a site of its species (within ``tol_angstrom``) is taken
    as a symmetry, and the images that land nowhere become new sites. Returns (frac, numbers)
    with the new sites appended (unchanged when none is found). Shapes (m, 3), (m,).
    """
    import moyopy

    lat_ds = moyopy.MoyoDataset(moyopy.Cell(lattice.tolist(), [[0.0, 0.0, 0.0]], [1]),
                                symprec=max(tol_angstrom, 0.01))
    rots = np.asarray(lat_ds.operations.rotations, dtype=float)
    zs, cnt = np.unique(numbers, return_counts=True)
    z_ref = zs[np.argmin(cnt)]
    ref = np.flatnonzero(numbers == z_ref)
    new_f: list[np.ndarray] = []
    new_z: list[int] = []

    def unmatched(img: np.ndarray, z_img: np.ndarray, f_all: np.ndarray, z_all: np.ndarray) -> np.ndarray:
        d = _min_image(img[:, None, :] - f_all[None, :, :]) @ lattice
        dist = np.linalg.norm(d, axis=2)
        dist[z_img[:, None] != z_all[None, :]] = np.inf
        return np.min(dist, axis=1) > tol_angstrom

    for w in rots:
        wf = frac @ w.T
        for j in ref:
            tau = frac[j] - wf[ref[0]]
            img = wf + tau
            miss = unmatched(img, numbers, frac, numbers)
            if not miss.any() or int(miss.sum()) > max_missing or miss.sum() * 5 >= len(frac):
                continue
            for f_new, z_new in zip(img[miss], numbers[miss]):
                if new_f and not unmatched(f_new[None], np.array([z_new]), np.array(new_f),
                                           np.array(new_z))[0]:
                    continue
                new_f.append(f_new - np.floor(f_new))
                new_z.append(int(z_new))
    if not new_f or len(new_f) > max_missing:
        return frac, numbers
    return np.vstack([frac, np.array(new_f)]), np.concatenate([numbers, np.array(new_z, dtype=numbers.dtype)])


def _low_support_basis(partial: tuple[Any, ...], rel: np.ndarray, nums: np.ndarray,
                       d_same_min: float, *, max_third: int = 24
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float, int, int] | None:
    """Third lattice vector of a small particle when only two are well supported.

    ``partial`` holds the accepted translations of a failed exact search (images of two or
    more elements) and the looser set (images of one element suffice, e.g. a single atom
    pair). With the two shortest independent accepted vectors fixed, each of the
    ``max_third`` shortest loose vectors out of their plane is tried as the third: the atoms
    are folded into that cell (only exact coincidences merge) and the basis whose folded
    crystal has the most symmetry operations (moyopy) wins: a wrong third vector shifts whole
    layers of atoms off their sites, which leaves no symmetry. A cell whose sites do not
    match the particle's composition (each element's share within 0.1) is not taken. Sites absent from the particle
    are first restored by symmetry (:func:`_complete_sites`). Unless one candidate is
    the most symmetric, with more than the inversion, or all the most symmetric candidates
    generate one lattice, None is returned (no guess).
    Returns the search tuple (basis, accepted vectors, weights, residual, tolerance, counts).
    """
    import moyopy

    acc, acc_n, loose, loose_n, s0, tol_acc, n_pre, n_scored = partial
    if len(acc) < 2 or len(loose) == 0:
        return None
    order = np.argsort(np.linalg.norm(acc, axis=1), kind="stable")
    v1 = acc[order[0]]
    cross = np.linalg.norm(np.cross(v1, acc[order]), axis=1) / (
        np.linalg.norm(v1) * np.linalg.norm(acc[order], axis=1))
    second = np.flatnonzero(cross > 0.1)
    if len(second) == 0:
        return None
    v2 = acc[order][second[0]]
    normal = np.cross(v1, v2)
    normal = normal / np.linalg.norm(normal)
    ln = np.linalg.norm(loose, axis=1)
    cands = np.flatnonzero(np.abs(loose @ normal) / ln > 0.1)
    cands = cands[np.argsort(ln[cands], kind="stable")][:max_third]
    if len(cands) == 0:
        return None
    # only exact coincidences merge (this runs on particles mapped onto themselves exactly)
    r_site = min(max(0.01, 3.0 * float(s0)) if np.isfinite(s0) else 0.01, 0.25 * d_same_min)
    best: tuple[int, int, float, int] | None = None
    ops_seen: list[int] = []  # per candidate, in the order of ``cands``
    for i in cands:
        red = _niggli(np.array([v1, v2, loose[i]]))
        frac = rel @ np.linalg.inv(red)
        frac = frac - np.floor(frac)
        site_f: list[np.ndarray] = []
        site_z: list[int] = []
        for z in np.unique(nums):
            idx = np.flatnonzero(nums == z)
            _, cen = _cluster_sites(frac[idx], np.arange(len(idx)), red, r_site)
            site_f.extend(cen)
            site_z.extend([int(z)] * len(cen))
        c_f, c_z = _complete_sites(red, np.array(site_f), np.array(site_z, dtype=np.int64),
                                   tol_angstrom=r_site)
        try:
            n_ops = len(moyopy.MoyoDataset(moyopy.Cell(red.tolist(), c_f.tolist(), c_z.tolist()),
                                           symprec=r_site).operations.rotations)
        except Exception:  # no consistent symmetry at this tolerance
            n_ops = 1
        # the cell must hold the particle's composition (a sub-cell of one sublattice,
        # e.g. half of a cation repeat, folds the other elements into too many sites)
        zs_all, n_z = np.unique(nums, return_counts=True)
        c_z_count = np.array([np.sum(c_z == z) for z in zs_all], dtype=float)
        if np.max(np.abs(c_z_count / c_z_count.sum() - n_z / n_z.sum())) > 0.1:
            n_ops = 1
        key = (-n_ops, len(site_f), round(abs(float(np.linalg.det(red))), 3), int(i))
        ops_seen.append(n_ops)
        if best is None or key[:3] < best[:3]:
            best = key
    assert best is not None
    top = [int(j) for j, o in zip(cands, ops_seen) if o == -best[0]]
    basis_best = np.array([v1, v2, loose[best[3]]])
    coef = loose[top] @ np.linalg.inv(basis_best)
    det_top = np.abs(np.linalg.det(np.stack([np.array([v1, v2, loose[j]]) for j in top])))
    same_lattice = bool(np.all(np.abs(coef - np.round(coef)) <= 0.05)
                        and np.all(np.abs(det_top - det_top[0]) <= 1e-3 * det_top[0]))
    if -best[0] <= 2 or not same_lattice:
        return None  # no lattice stands out (ties between different lattices): no guess
    third = loose[best[3]]
    vecs = np.vstack([acc, third[None, :]])
    weights = np.concatenate([acc_n, loose_n[best[3]:best[3] + 1]])
    return np.array([v1, v2, third]), vecs, weights, float(s0), float(tol_acc), int(n_pre), int(n_scored)


# --- the solver --------------------------------------------------------------------------------
def solve(numbers: np.ndarray, positions_angstrom: np.ndarray, *,
          symprec_sweep_angstrom: tuple[float, ...] = DEFAULT_SYMPREC_SWEEP_ANGSTROM,
          max_translation_angstrom: float = 16.0,
          boundary_margin_angstrom: float = 0.3,
          max_probe_atoms: int = 160,
          max_ref_probes: int = 48,
          n_origins: int = 6,
          max_candidate_pairs: int = 3000,
          match_fraction: float = 0.9,
          min_atoms: int = 8,
          min_in_bounds: int = 3,
          chunk_size: int = 48,
          stable_plateau: int = 3,
          min_translation_tol_angstrom: float = 5e-4,
          translation_z: float = 4.0,
          rescore_max_atoms: int = 600) -> SolverResult:
    """Recover the bulk crystal of a finite particle.

    Args:
        numbers: (n,) atomic numbers.
        positions_angstrom: (n, 3) Cartesian positions in Å (any frame, any order).
        symprec_sweep_angstrom: symmetry tolerances tried, tight to loose (Å); values below
            the estimated noise floor are skipped.
        max_translation_angstrom: longest lattice translation searched for (Å).
        boundary_margin_angstrom: images closer than this to the particle's convex hull
            (or outside it) are not asked to land on atoms (Å).
        max_probe_atoms: central atoms used to score translations (all elements).
        max_ref_probes: central reference-element atoms for the cheap pre-screen.
        n_origins: at least this many reference-element atoms (closest to the centre) are
            origins of candidate translations; more, up to all, while the number of
            origin-target pairs stays below ``max_candidate_pairs``.
        max_candidate_pairs: budget of candidate difference vectors before deduplication.
        match_fraction: fraction of in-particle images that must land on an atom for a
            translation to be accepted.
        min_atoms: fewer atoms than this is an error.
        min_in_bounds: a candidate needs at least this many in-particle images.
        chunk_size: candidates scored per batch.
        stable_plateau: consecutive sweep tolerances agreeing on a space group for full
            stability (the sweep stops there).
        min_translation_tol_angstrom: smallest tolerance (Å) for an image to count as
            landing on an atom (clean particles; kept below the 1e-3 Å of the targets so that
            a pseudo-translation is never taken for a lattice vector).
        translation_z: a candidate is a lattice translation when its mean squared residual
            exceeds the best candidate's by less than this many standard errors.
        rescore_max_atoms: particles up to this size are re-scored with a noise-sized
            boundary margin when the translations look clean (or none was found).

    Returns:
        A :class:`SolverResult`.

    Raises:
        C2NPInputError: malformed input, or no lattice could be found.
    """
    import moyopy
    from scipy.spatial import cKDTree

    t_start = time.perf_counter()
    nums, pos = _validate(numbers, positions_angstrom, min_atoms)
    sweep = tuple(float(s) for s in symprec_sweep_angstrom)
    if not sweep or any(not (s > 0 and np.isfinite(s)) for s in sweep):
        raise C2NPInputError("symprec_sweep_angstrom must be positive finite tolerances")
    sweep = tuple(sorted(sweep))
    n = len(nums)

    # 1. bounds --------------------------------------------------------------------------
    centre = pos.mean(axis=0)
    rel = pos - centre
    r = np.linalg.norm(rel, axis=1)
    bounds = _bounds(rel, r, boundary_margin_angstrom)
    r_in = bounds.r_in
    if bounds.r_out - boundary_margin_angstrom <= 1.0:
        raise C2NPNoAnswerError(f"solver input: the particle is too small (radius "
                                f"{bounds.r_out:.2f} Å) to find a lattice")
    # every "closest k atoms" below takes whole shells of equal distance from the centroid,
    # so the sets do not depend on the atom order or on rounding in the particle's frame
    by_centre = np.argsort(r, kind="stable")
    r_key = r

    positions4 = np.column_stack([rel, nums * _ELEMENT_KEY])
    tree = cKDTree(positions4)

    # same-element nearest-neighbour distances of central atoms -> loose tolerance
    probe = by_centre[:_whole_shells(r_key[by_centre], max_probe_atoms)]
    dnn, _ = tree.query(positions4[probe], k=2)
    same = dnn[:, 1] < _ELEMENT_KEY * 0.5
    if not same.any():
        raise C2NPNoAnswerError("solver input: no two atoms of the same element; no lattice to find")
    per_elem = [float(np.median(dnn[same & (nums[probe] == z), 1]))
                for z in np.unique(nums[probe]) if np.any(same & (nums[probe] == z))]
    d_same_min = min(per_elem)
    if d_same_min < 0.05:
        raise C2NPInputError(f"solver input: atoms of the same element overlap "
                             f"(typical nearest-neighbour distance {d_same_min:.3f} Å)")
    tol_loose = min(1.0, 0.45 * d_same_min)

    # 2. candidates ---------------------------------------------------------------------
    zs, counts = np.unique(nums, return_counts=True)
    n_species = int(np.sum(counts >= 2))
    order_z = np.argsort(counts, kind="stable")
    ref_z = None
    for i in order_z:
        if counts[i] >= 4:
            ref_z = int(zs[i])
            break
    if ref_z is None:
        raise C2NPNoAnswerError("solver input: no element has 4 or more atoms; no lattice to find")
    ref_idx = by_centre[nums[by_centre] == ref_z]
    n_orig = int(np.clip(max_candidate_pairs // len(ref_idx), n_origins, len(ref_idx)))
    origins = ref_idx[:_whole_shells(r_key[ref_idx], n_orig)]
    n_orig = len(origins)
    lmax = min(max_translation_angstrom, 2.0 * (bounds.r_out - boundary_margin_angstrom))
    pieces = [(rel[ref_idx][None, :, :] - rel[origins][:, None, :]).reshape(-1, 3)]
    budget = max_candidate_pairs - n_orig * len(ref_idx)
    # small particles: a lattice vector may join no two atoms of the reference element,
    # so the other elements contribute candidates while the budget lasts
    for i in order_z:
        z = int(zs[i])
        if z == ref_z or counts[i] < 2 or budget < 2 * counts[i]:
            continue
        idx_z = by_centre[nums[by_centre] == z]
        k = _whole_shells(r_key[idx_z], int(min(len(idx_z), budget // len(idx_z))))
        pieces.append((rel[idx_z][None, :, :] - rel[idx_z[:k]][:, None, :]).reshape(-1, 3))
        budget -= k * len(idx_z)
    vec = np.concatenate(pieces)
    lens = np.linalg.norm(vec, axis=1)
    keep = (lens > max(0.3, 0.5 * d_same_min)) & (lens <= lmax)
    vec = vec[keep]
    if len(vec) == 0:
        raise C2NPNoAnswerError("solver input: no candidate translations (particle too small)")
    u = np.array([0.5773, 0.3090, 0.7557])
    s = np.sign(vec @ u)
    s[s == 0] = 1.0
    vec = vec * s[:, None]
    # near-duplicates are merged by distance, not on a grid in the particle's frame (a
    # grid would merge differently in every orientation): in length order, a vector closer
    # than ``grid`` to a shorter one is dropped
    grid = max(0.5 * tol_loose, 0.05)
    vec = vec[np.lexsort((vec[:, 2], vec[:, 1], vec[:, 0], np.round(np.linalg.norm(vec, axis=1), 6)))]
    pairs = cKDTree(vec).query_pairs(grid, output_type="ndarray")
    if len(pairs):
        vec = vec[np.setdiff1d(np.arange(len(vec)), np.max(pairs, axis=1))]

    n_candidates = int(len(vec))
    ref_probe = ref_idx[:_whole_shells(r_key[ref_idx], max_ref_probes)]
    probe_pos = rel[probe]
    probe_key = positions4[probe, 3]

    # 3. score in length order until a lattice is found --------------------------------
    def search(bnd: _Bounds, min_in_bounds: int = min_in_bounds
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float, int, int] | None:
        """Score candidates in length order until three independent translations are
        accepted (and a margin beyond them is covered)."""
        scores = _Scores()
        basis = None
        tol_acc = np.inf
        s0 = np.inf
        accepted = np.zeros(0, dtype=bool)
        n_prescreened = 0
        start = 0
        while start < len(vec):
            chunk = vec[start:start + chunk_size]
            start += len(chunk)
            n_prescreened += len(chunk)
            # cheap pre-screen on the central reference-element atoms only
            n_in_ref, _, _, res_ref, _ = _score_batch(chunk, rel[ref_probe], positions4[ref_probe, 3],
                                                   tree, positions4, bnd, tol_loose)
            frac_ref = np.array([np.mean(np.isfinite(rr)) if len(rr) else 0.0 for rr in res_ref])
            batch = chunk[(n_in_ref < 2) | (frac_ref >= 0.75)]  # reject only on evidence
            if len(batch) == 0:
                continue
            n_in_b, nel_b, ref_b, res_b, ms_b = _score_batch(batch, probe_pos, probe_key, tree, positions4,
                                                       bnd, tol_loose)
            scores.vectors.append(batch)
            scores.refined.append(ref_b)
            scores.n_in.append(n_in_b)
            scores.n_elem.append(nel_b)
            scores.residuals.append(res_b)  # type: ignore[arg-type]
            scores.ms.append(ms_b)
            all_vec, all_ref, all_n, all_elem = scores.cat()
            residuals = scores.residual_list()
            support_min = max(min_in_bounds, 0.25 * float(all_n.max()))
            frac_m = np.array([np.mean(np.isfinite(rr)) if len(rr) else 0.0 for rr in residuals])
            ms = np.concatenate(scores.ms)
            matched = (all_n >= min_in_bounds) & (frac_m >= match_fraction)
            well = matched & (all_n >= support_min)
            if not well.any():
                continue
            i0 = int(np.flatnonzero(well)[np.argmin(ms[well])])
            ms0 = float(ms[i0])
            # a true translation leaves pure noise: its mean squared residual matches the best
            # candidate's within sampling error (each pair is seen twice, from +t and -t)
            rel_sd = np.sqrt(2.0 / (3.0 * np.maximum(all_n / 2.0, 1.0)) + 2.0 / (3.0 * max(all_n[i0] / 2.0, 1.0)))
            bound = np.maximum(ms0 * (1.0 + translation_z * rel_sd), min_translation_tol_angstrom ** 2)
            diverse = (all_elem >= min(2, n_species)) | (all_n >= 8)
            accepted = matched & (ms <= bound) & diverse
            s0 = float(np.sqrt(ms0))
            tol_acc = float(np.sqrt(np.max(bound[accepted]))) if accepted.any() else np.inf
            basis = _greedy_basis(all_ref[accepted])
            if basis is not None:
                longest = float(np.max(np.linalg.norm(basis, axis=1)))
                # a basis that does not map the particle onto itself exactly may be the
                # sub-cell of a superstructure (perovskite tilts: sqrt(2) and 2 times
                # longer): then the search goes on to twice its length
                reach = 1.25 if s0 <= 10.0 * min_translation_tol_angstrom else 2.0
                if float(np.linalg.norm(chunk[-1])) > reach * longest + 0.5:
                    break
        if basis is None:
            noise_hint.append(s0)
            if len(accepted) and len(accepted) == len(scores.cat()[0]):
                all_vec, all_ref, all_n, all_elem = scores.cat()
                # the translations that map the particle onto itself, before the rule that
                # asks for images of two elements (kept for the low-support fallback)
                loose = matched & (ms <= bound)
                partial.append((all_ref[accepted], all_n[accepted].astype(float),
                                all_ref[loose], all_n[loose].astype(float),
                                s0, tol_acc, n_prescreened, len(all_vec)))
            return None
        all_vec, all_ref, all_n, all_elem = scores.cat()
        return (basis, all_ref[accepted], all_n[accepted].astype(float), s0, tol_acc, n_prescreened,
                len(all_vec))

    low_support = False  # the third lattice vector rests on a single atom pair
    noise_hint: list[float] = []  # rms residual of the best candidate of a failed search
    partial: list[tuple[Any, ...]] = []  # accepted translations of a failed search
    found = search(bounds)
    margin_used = boundary_margin_angstrom
    if found is None or (n <= rescore_max_atoms and found[3] < 0.05 * boundary_margin_angstrom):
        # the fixed margin guards against noise; when the translations show little noise (or
        # none was found) small particles are re-scored with a margin sized to the noise, so
        # that images near the surface, where long translations land, count too
        s_est = found[3] if found is not None else (noise_hint[-1] if noise_hint else np.inf)
        # (atoms on the hull itself count: a hull vertex is inside the particle; the 1e-5 Å
        # slack absorbs rounding of stored coordinates)
        margin2 = float(3.0 * s_est - 1e-5) if np.isfinite(s_est) else 0.5 * boundary_margin_angstrom
        if margin2 < boundary_margin_angstrom:
            again = search(_Bounds(bounds.equations, bounds.r_in, bounds.r_out, margin2))
            if again is not None:
                found, margin_used = again, margin2
    if n <= rescore_max_atoms and (found is None or found[3] > 10.0 * min_translation_tol_angstrom):
        # a small particle whose best lattice leaves a residual (or none was found): every
        # image inside the hull is tested and two images suffice, so that long translations,
        # seen only by a few atom pairs near the surface, count. A clean particle is mapped
        # onto itself exactly by its true lattice; that result is kept when it fits clearly
        # better than the first
        exact = search(_Bounds(bounds.equations, bounds.r_in, bounds.r_out, -1e-5),
                       min(min_in_bounds, 2))
        if exact is not None and (found is None or exact[3] < 0.5 * found[3]):
            found, margin_used = exact, -1e-5
        elif exact is None and found is None and partial:
            low = _low_support_basis(partial[-1], rel, nums, d_same_min)
            if low is not None:
                found, margin_used, low_support = low, -1e-5, True
    if found is None:
        raise C2NPNoAnswerError("solver input: no lattice found (no three independent translations "
                                "map the particle onto itself)")
    basis, acc_vec, acc_w, s0, tol_acc, n_prescreened, n_scored = found

    # 4. lattice: integrality, least squares, reduction -----------------------------------
    coef = acc_vec @ np.linalg.inv(basis)
    nonint = np.max(np.abs(coef - np.round(coef)), axis=1) > 0.12
    n_inconsistent = 0
    if nonint.any():
        # an accepted vector that is not an integer combination of the basis implies a finer
        # lattice, hence a short vector (its coset representative). Score the shortest
        # implied vectors directly: when they fail, the accepted vector was a
        # pseudo-translation seen through too few images (e.g. all from one sublattice)
        spurious = np.zeros(len(acc_vec), dtype=bool)
        bnd_used = _Bounds(bounds.equations, bounds.r_in, bounds.r_out, margin_used)
        for i in np.flatnonzero(nonint):
            implied = _coset_representatives(acc_vec[i], basis)
            implied = implied[np.argsort(np.linalg.norm(implied, axis=1))[:4]]
            n_i, _, _, res_i, ms_i = _score_batch(implied, probe_pos, probe_key, tree, positions4,
                                                  bnd_used, tol_loose)
            ok_i = [len(rr) >= min_in_bounds and np.mean(np.isfinite(rr)) >= match_fraction
                    and m_i <= tol_acc ** 2 for rr, m_i in zip(res_i, ms_i)]
            refuted_i = [len(rr) >= min_in_bounds and not ok for rr, ok in zip(res_i, ok_i)]
            spurious[i] = any(refuted_i) and not any(ok_i)
        n_inconsistent = int(spurious.sum())
        acc_vec, acc_w, coef, nonint = acc_vec[~spurious], acc_w[~spurious], coef[~spurious], nonint[~spurious]
    if nonint.any():
        better = _best_triple(acc_vec)
        if better is not None:
            basis = better
            coef = acc_vec @ np.linalg.inv(basis)
            nonint = np.max(np.abs(coef - np.round(coef)), axis=1) > 0.12
        n_inconsistent += int(nonint.sum())
    good = ~nonint
    ncoef = np.round(coef[good])
    w = np.sqrt(acc_w[good])[:, None]
    sol, *_ = np.linalg.lstsq(ncoef * w, acc_vec[good] * w, rcond=None)
    lattice = _niggli(sol)
    if abs(np.linalg.det(lattice)) < 1e-3:
        raise C2NPNoAnswerError("solver input: no lattice found (degenerate translations)")

    # 5. fold, cluster, refine --------------------------------------------------------------
    sigma = s0 / np.sqrt(6.0) if np.isfinite(s0) else 0.1  # per-component position noise (Å)
    r_cluster = float(min(0.4 * d_same_min, max(0.12, 5.0 * sigma + 0.08)))
    origin = rel[origins[0]]
    inv = np.linalg.inv(lattice)
    frac = (rel - origin) @ inv
    frac_w = frac - np.floor(frac)
    labels = np.full(n, -1, dtype=np.int64)
    site_frac: list[np.ndarray] = []
    site_z: list[int] = []
    rank = np.empty(n, dtype=np.int64)
    rank[by_centre] = np.arange(n)
    for z in zs:
        idx = np.flatnonzero(nums == z)
        lab, cen = _cluster_sites(frac_w[idx], np.argsort(rank[idx], kind="stable"), lattice, r_cluster)
        labels[idx] = lab + len(site_frac)
        site_frac.extend(cen)
        site_z.extend([int(z)] * len(cen))
    site_frac_a = np.array(site_frac)
    site_z_a = np.array(site_z, dtype=np.int64)
    site_count = np.bincount(labels, minlength=len(site_frac_a))
    typical = float(np.median(site_count[site_count >= 2])) if np.any(site_count >= 2) else 1.0
    if typical < 2:
        raise C2NPNoAnswerError("solver input: no periodicity found (no site repeats in the particle)")
    # every atom is evidence (a site seen once in a small particle is still a site), but in a
    # particle where sites repeat many times a tiny cluster is a stray atom (noise tail, defect)
    median_count = float(np.median(site_count))
    keep_site = site_count >= (max(2.0, 0.1 * median_count) if median_count >= 20 else 1.0)

    def assign(lat: np.ndarray, sites: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Nearest kept site of the same element for every atom: (site, cell index, dist)."""
        f = (rel - origin) @ np.linalg.inv(lat)
        best_site = np.full(n, -1, dtype=np.int64)
        best_d = np.full(n, np.inf)
        best_cell = np.zeros((n, 3))
        for z in zs:
            idx = np.flatnonzero(nums == z)
            sidx = np.flatnonzero((site_z_a == z) & keep_site)
            if len(sidx) == 0:
                continue
            diff = f[idx][:, None, :] - sites[sidx][None, :, :]
            cell_n = np.round(diff)
            cart = (diff - cell_n) @ lat
            d = np.linalg.norm(cart, axis=2)
            j = np.argmin(d, axis=1)
            best_site[idx] = sidx[j]
            best_d[idx] = d[np.arange(len(idx)), j]
            best_cell[idx] = cell_n[np.arange(len(idx)), j]
        return best_site, best_cell, best_d

    used = np.flatnonzero(keep_site)
    col = np.full(len(site_frac_a), -1, dtype=np.int64)
    col[used] = np.arange(len(used))

    def refine(s_idx: np.ndarray, cell_n: np.ndarray, ok: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, float]:
        """Joint linear least squares x_i - origin = c_site + n_i . L over atoms ``ok``."""
        m = int(ok.sum())
        if m < len(used) + 3:
            raise C2NPNoAnswerError("solver input: no lattice found (too few atoms on sites)")
        k = col[s_idx[ok]]
        nn = cell_n[ok]
        target = rel[ok] - origin
        # normal equations, site offsets eliminated (Schur complement): 3x3 solve for L
        cnt = np.bincount(k, minlength=len(used)).astype(float)
        if np.any(cnt == 0):
            cnt = np.maximum(cnt, 1.0)
        s_n = np.column_stack([np.bincount(k, weights=nn[:, j], minlength=len(used)) for j in range(3)])
        s_x = np.column_stack([np.bincount(k, weights=target[:, j], minlength=len(used))
                               for j in range(3)])
        lhs = nn.T @ nn - (s_n / cnt[:, None]).T @ s_n
        rhs = nn.T @ target - (s_n / cnt[:, None]).T @ s_x
        if abs(np.linalg.det(lhs)) < 1e-9:
            raise C2NPNoAnswerError("solver input: no lattice found (atoms span too few cells)")
        lat_new = np.linalg.solve(lhs, rhs)
        offs = (s_x - s_n @ lat_new) / cnt[:, None]
        resid = target - offs[k] - nn @ lat_new
        rms_ = float(np.sqrt(np.mean(np.einsum("ij,ij->i", resid, resid))))
        return lat_new, offs, rms_

    # first pass: the clustering's own assignment
    diff = frac - site_frac_a[labels]
    cell0 = np.round(diff)
    cart0 = (diff - cell0) @ lattice
    ok0 = keep_site[labels] & (np.einsum("ij,ij->i", cart0, cart0) <= r_cluster ** 2)
    site_pos = site_frac_a.copy()
    new_lat, offsets, rms = refine(labels, cell0, ok0)
    if abs(np.linalg.det(new_lat)) > 1e-3:
        lattice = new_lat
        site_pos[used] = offsets @ np.linalg.inv(lattice)
    # second pass: with the refined lattice, atoms keep their site when they sit on it;
    # otherwise every atom is reassigned to its nearest site and the fit is redone
    diff1 = (rel - origin) @ np.linalg.inv(lattice) - site_pos[labels]
    cell1 = np.round(diff1)
    cart1 = (diff1 - cell1) @ lattice
    d1 = np.sqrt(np.einsum("ij,ij->i", cart1, cart1))
    if bool(np.all(d1 <= 0.5 * r_cluster)):
        s_idx, cell_n, dist = labels, cell1, d1
    else:
        s_idx, cell_n, dist = assign(lattice, site_pos)
    on_site = (s_idx >= 0) & (dist <= r_cluster)
    new_lat, offsets, rms = refine(s_idx, cell_n, on_site)
    if abs(np.linalg.det(new_lat)) > 1e-3:
        lattice = new_lat
        site_pos[used] = offsets @ np.linalg.inv(lattice)
    explained = float(on_site.mean())
    counts_used = np.bincount(s_idx[on_site], minlength=len(site_pos))[used]
    prim_frac = site_pos[used] - np.floor(site_pos[used])
    prim_z = site_z_a[used]

    # 6. symmetry sweep ---------------------------------------------------------------------
    sigma_pos = rms / np.sqrt(3.0) if np.isfinite(rms) else sigma
    sigma_site = sigma_pos / np.sqrt(max(float(np.min(counts_used)), 1.0))
    floor = max(sweep[0], 6.0 * sigma_site)
    tried = [s for s in sweep if s >= floor] or [floor, 1.5 * floor, 2.25 * floor]
    records, chosen_rec, plateau = _symmetry_sweep(lattice, prim_frac, prim_z, tried, stable_plateau)
    sp, number, ds = chosen_rec
    assert number is not None and ds is not None
    n_restored = 0
    if float(np.min(counts_used)) <= 2 and len(ds.operations.rotations) < len(
            moyopy.MoyoDataset(moyopy.Cell(lattice.tolist(), [[0.0, 0.0, 0.0]], [1]),
                               symprec=max(float(sp), 0.01)).operations.rotations):
        # a small particle may hold no atom of some site, which lowers the symmetry found;
        # such a site is restored from the operations the other sites obey, and kept when
        # the completed cell is more symmetric
        c_frac, c_z = _complete_sites(lattice, prim_frac, prim_z, tol_angstrom=max(float(sp), 0.01))
        if len(c_z) > len(prim_z):
            rec2, chosen2, plateau2 = _symmetry_sweep(lattice, c_frac, c_z, tried, stable_plateau)
            if chosen2[2] is not None and len(chosen2[2].operations.rotations) > len(ds.operations.rotations):
                n_restored = len(c_z) - len(prim_z)
                records, chosen_rec, plateau = rec2, chosen2, plateau2
                sp, number, ds = chosen_rec
    std_lat = np.asarray(ds.std_cell.basis, dtype=float)
    a, b, c, al, be, ga = lattice_parameters(std_lat)
    cell = UnitCell("identified", std_lat, np.asarray(ds.std_cell.numbers, dtype=np.int64),
                    np.asarray(ds.std_cell.positions, dtype=float))
    symbol = moyopy.SpaceGroupType(int(number)).hm_short.replace(" ", "")

    stability = min(1.0, plateau / float(stable_plateau))
    support = float(min(1.0, max(0.0, (np.median(counts_used) - 1.0) / 3.0)))
    consistency = 1.0 - n_inconsistent / max(1, len(acc_vec))
    # the atoms scatter about their sites as much as the translations said they would
    # (sqrt(3) sigma vs sqrt(6) sigma); a wrong lattice smears the sites far more
    expected_rms = 2.0 * s0 / np.sqrt(2.0) + 2e-3
    fit = float(min(1.0, expected_rms / rms)) if rms > 0 else 1.0
    completeness = 1.0 - n_restored / float(len(prim_z) + n_restored)  # restored sites are inferred
    if low_support:
        completeness *= 0.5
    confidence = float(np.clip(explained * stability * support * consistency * fit * completeness,
                               0.0, 1.0))
    diagnostics: dict[str, Any] = {
        "reference_element": ref_z,
        "inscribed_radius_angstrom": r_in,
        "n_candidates": n_candidates,
        "n_prescreened": n_prescreened,
        "n_scored": int(n_scored),
        "boundary_margin_angstrom": float(margin_used),
        "n_translations_accepted": int(len(acc_vec)),
        "n_translations_inconsistent": n_inconsistent,
        "translation_tolerance_angstrom": float(tol_acc),
        "translation_rms_angstrom": float(s0),
        "cluster_radius_angstrom": r_cluster,
        "site_rms_angstrom": float(rms),
        "n_sites": int(len(used)),
        "n_stray_clusters": int(np.sum(~keep_site)),
        "n_sites_restored": int(n_restored),
        "low_support_lattice": bool(low_support),
        "site_counts": counts_used.tolist(),
        "explained_fraction": explained,
        "symprec_floor_angstrom": float(floor),
        "sweep": [[float(x), g] for x, g, _ in records],
        "plateau_length": int(plateau),
        "stability": stability,
        "repeat_support": support,
        "translation_consistency": consistency,
        "site_fit": fit,
        "symmetry_library": "moyopy",
        "symmetry_library_version": str(moyopy.__version__),
        "elapsed_s": time.perf_counter() - t_start,
    }
    return SolverResult(
        a_angstrom=a, b_angstrom=b, c_angstrom=c, alpha_deg=al, beta_deg=be, gamma_deg=ga,
        spacegroup=int(number), international=symbol,
        crystal_system=crystal_system(int(number)), confidence=confidence, cell=cell,
        primitive_lattice_angstrom=np.array(lattice), symprec_angstrom=float(sp), n_atoms=n,
        diagnostics=diagnostics)


def solve_particle(particle: Any, **kwargs: Any) -> SolverResult:
    """:func:`solve` on a :class:`c2np.carving.Particle` (keyword arguments passed on)."""
    return solve(particle.numbers, particle.positions_angstrom, **kwargs)
