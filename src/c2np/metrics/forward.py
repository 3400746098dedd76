"""Task-1 (forward) metrics (contract §6): a predicted particle P against the reference
particle G, both as species ``(n,)`` int atomic numbers and positions ``(n, 3)`` in Å in the
centred frame. Every metric is free of atom order. Quantities of G that do not depend on
the rotation (atom counts, pair-distance histogram, hull volume) are computed once per
(material, R) in a :class:`ReferenceSummary`. An unusable P is a failure scored by
:func:`forward_failure` (every metric at its documented penalty)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from c2np.assignment import PointGrid, close_pairs, min_sq_assignment, nearest_neighbours
from c2np.metrics.matching import _matching_size
from c2np.metrics.pair_histogram import TooManyPairs, pair_distance_counts, pair_distance_error
from c2np.metrics.paper import density_normalised_histogram, rdf_energy
from c2np.metrics.registry import (
    F1_TOLERANCES_ANGSTROM,
    MAX_ATOMIC_NUMBER,
    MAX_COORDINATE_ANGSTROM,
    RDF_N_BINS,
    RDF_R_MAX_ANGSTROM,
    Metric,
    MetricInfo,
    Scores,
    _tol_tag,
    f1_name,
)

__all__ = [
    "ReferenceSummary",
    "hull_volume_angstrom3",
    "hull_volume_ratio",
    "composition_distance",
    "forward_metric_info",
    "forward_metrics",
    "forward_failure",
    "forward_penalties",
    "check_forward_prediction",
    "check_prediction_size",
]


def hull_volume_angstrom3(positions_angstrom: np.ndarray) -> float:
    """Convex-hull volume in Å³; 0 for fewer than 4 atoms or a flat (degenerate) set."""
    from scipy.spatial import ConvexHull, QhullError

    x = np.asarray(positions_angstrom, dtype=np.float64)
    if len(x) < 4:
        return 0.0
    try:
        # Qhull on the outer shell only when that provably gives the same hull: the hull
        # of the atoms with |x - c| >= rho contains the ball of radius rho around c (every
        # facet at distance >= rho), so the inner atoms lie inside it.
        centre = x.mean(axis=0)
        dist = np.linalg.norm(x - centre, axis=1)
        rho = 0.85 * float(dist.max())
        outer = dist >= rho
        if 4 <= int(outer.sum()) < len(x):
            hull = ConvexHull(x[outer])
            normals, offsets = hull.equations[:, :3], hull.equations[:, 3]
            if float(np.min(-(normals @ centre + offsets))) >= rho:
                return float(hull.volume)
    except QhullError:
        pass  # e.g. a flat outer shell: use every atom
    try:
        return float(ConvexHull(x).volume)
    except QhullError:
        return 0.0


def composition_distance(numbers_pred: np.ndarray, numbers_ref: np.ndarray) -> float:
    """Total variation ``½ Σ_e |x_P,e − x_G,e|`` of element fractions, in [0, 1]."""
    zp = np.asarray(numbers_pred, dtype=np.int64)
    zg = np.asarray(numbers_ref, dtype=np.int64)
    if len(zp) == 0 or len(zg) == 0:
        return 1.0 if len(zp) != len(zg) else 0.0
    fp = np.bincount(zp, minlength=MAX_ATOMIC_NUMBER + 1) / len(zp)
    fg = np.bincount(zg, minlength=MAX_ATOMIC_NUMBER + 1) / len(zg)
    return float(0.5 * np.abs(fp - fg).sum())


@dataclass(frozen=True, eq=False)
class ReferenceSummary:
    """Rotation-independent facts about a reference particle, computed once per (material, R).

    Attributes:
        radius_angstrom: sphere radius R.
        n_atoms: atom count of G.
        numbers: (n,) atomic numbers of G (any order).
        pair_counts: (n_bins,) pair-distance histogram of G on [0, r_max] Å.
        hull_volume_angstrom3: convex-hull volume of G.
        r_max_angstrom: histogram range.
    """

    radius_angstrom: float
    n_atoms: int
    numbers: np.ndarray
    pair_counts: np.ndarray
    hull_volume_angstrom3: float
    r_max_angstrom: float = RDF_R_MAX_ANGSTROM

    @classmethod
    def from_particle(cls, numbers: np.ndarray, positions_angstrom: np.ndarray, *,
                      radius_angstrom: float, r_max_angstrom: float = RDF_R_MAX_ANGSTROM,
                      n_bins: int = RDF_N_BINS) -> ReferenceSummary:
        """Compute the summary of G (any rotation of it gives the same summary)."""
        z = np.asarray(numbers, dtype=np.int64).copy()
        x = np.asarray(positions_angstrom, dtype=np.float64)
        z.setflags(write=False)
        counts = pair_distance_counts(x, r_max_angstrom=r_max_angstrom, n_bins=n_bins)
        counts.setflags(write=False)
        return cls(radius_angstrom=float(radius_angstrom), n_atoms=len(z), numbers=z,
                   pair_counts=counts, hull_volume_angstrom3=hull_volume_angstrom3(x),
                   r_max_angstrom=float(r_max_angstrom))

    @property
    def sphere_volume_angstrom3(self) -> float:
        """4/3 π R³."""
        return 4.0 / 3.0 * math.pi * self.radius_angstrom ** 3

    @property
    def volume_ratio_sphere_paper(self) -> float:
        """The paper's V_hull / (4/3 π R³) of the reference (what a perfect prediction scores
        on ``volume_ratio_sphere_paper``)."""
        return self.hull_volume_angstrom3 / self.sphere_volume_angstrom3

    @property
    def rdf_energy_bound(self) -> float:
        """Upper bound of the RDF energy of any prediction: ``1/Δ² + Σ h_G²``."""
        hg = density_normalised_histogram(self.pair_counts, r_max_angstrom=self.r_max_angstrom)
        delta = self.r_max_angstrom / len(self.pair_counts)
        return float(1.0 / delta ** 2 + np.sum(hg * hg))



def forward_metric_info(tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM
                        ) -> dict[str, MetricInfo]:
    """The aggregated task-1 metrics, in display order (:class:`Metric`; precision / recall
    / F1 at each of ``tolerances_angstrom``)."""
    out: list[MetricInfo] = []
    for tol in tolerances_angstrom:
        for kind in ("f1", "precision", "recall"):
            name = f1_name(kind, tol)
            out.append(Metric(name).info if name in Metric._value2member_map_  # type: ignore[call-arg]
                       else MetricInfo(name, "1", "higher", "0"))
    out += [m.info for m in Metric if m.task == "forward" and "@" not in m.value]
    return {m.name: m for m in out}


def hull_volume_ratio(pred_volume_angstrom3: float, ref_volume_angstrom3: float) -> float:
    """V_hull(P) / V_hull(G): 1 for a perfect prediction. When G has no volume (fewer than 4
    atoms, or flat): 1 if P has none either, else 0 (the failure value)."""
    if ref_volume_angstrom3 > 0:
        return float(pred_volume_angstrom3 / ref_volume_angstrom3)
    return 1.0 if pred_volume_angstrom3 <= 0 else 0.0


def forward_penalties(reference: ReferenceSummary,
                      tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM
                      ) -> dict[str, float]:
    """Value of every task-1 metric for a failed sample (documented, never the best)."""
    diameter = 2.0 * reference.radius_angstrom
    out: dict[str, float] = {}
    for tol in tolerances_angstrom:
        t = _tol_tag(tol)
        out[f"f1@{t}"] = 0.0
        out[f"precision@{t}"] = 0.0
        out[f"recall@{t}"] = 0.0
    out.update({
        "count_error": 1.0,
        "composition_distance": 1.0,
        "hausdorff": diameter,
        "chamfer": diameter,
        "matched_rmsd": diameter,
        "hull_volume_rel_error": 1.0,
        "hull_volume_ratio": 0.0,
        "volume_ratio_sphere_paper": 0.0,
        "pair_distance_error": 1.0,
        "paper_rmsd": diameter / math.sqrt(3.0),
        "paper_hausdorff": diameter,
        "paper_abs_delta_hull_volume": reference.hull_volume_angstrom3,
        "paper_rdf_energy": reference.rdf_energy_bound,
    })
    return out


def forward_failure(reason: str, reference: ReferenceSummary, *,
                    tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM) -> Scores:
    """Scores of an unusable prediction: every metric at its penalty value."""
    return Scores(values=forward_penalties(reference, tolerances_angstrom), ok=False,
                  failure_reason=reason,
                  details={"n_pred": 0, "n_ref": reference.n_atoms})



def check_forward_prediction(numbers: np.ndarray | None, positions_angstrom: np.ndarray | None
                             ) -> str | None:
    """Why a predicted particle cannot be scored, or None when it can."""
    if numbers is None or positions_angstrom is None:
        return "missing prediction"
    z = np.asarray(numbers)
    x = np.asarray(positions_angstrom)
    if z.ndim != 1 or x.ndim != 2 or x.shape[1:] != (3,) or len(z) != len(x):
        return f"malformed prediction (species {z.shape}, positions {x.shape})"
    if len(z) == 0:
        return "empty prediction (0 atoms)"
    if not np.issubdtype(z.dtype, np.integer) or np.any(z < 1) or np.any(z > MAX_ATOMIC_NUMBER):
        return "unknown atomic numbers"
    if not np.all(np.isfinite(x)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(x), axis=1))[0])
        return f"non-finite position (atom {bad})"
    if float(np.abs(x).max()) > MAX_COORDINATE_ANGSTROM:
        far = int(np.flatnonzero(np.any(np.abs(x) > MAX_COORDINATE_ANGSTROM, axis=1))[0])
        return f"position beyond {MAX_COORDINATE_ANGSTROM:g} Å (atom {far})"
    return None


def check_prediction_size(n_pred: int, n_ref: int) -> str | None:
    """Why a predicted particle is too large to score in bounded time (the limit
    ``prediction_atoms_factor``: that many times the reference's atoms, plus 100), or None."""
    from c2np.limits import effective

    factor = effective("prediction_atoms_factor")
    if n_pred > factor * n_ref + 100:
        return (f"{n_pred} predicted atoms exceed the limit prediction_atoms_factor ({factor:g} x "
                f"{n_ref} reference atoms + 100; raise it with `c2np --limit prediction_atoms_factor=N`)")
    return None


def forward_metrics(pred_numbers: np.ndarray | None, pred_positions_angstrom: np.ndarray | None,
                    ref_numbers: np.ndarray, ref_positions_angstrom: np.ndarray, *,
                    reference: ReferenceSummary | None = None,
                    radius_angstrom: float | None = None,
                    tolerances_angstrom: Sequence[float] = F1_TOLERANCES_ANGSTROM) -> Scores:
    """All task-1 metrics of prediction P against reference G (see docs/explanation/metrics.md).

    ``reference`` is G's rotation-independent summary (computed here when None, which
    needs ``radius_angstrom``). An unusable P returns :func:`forward_failure`.
    """
    zg = np.asarray(ref_numbers, dtype=np.int64)
    xg = np.asarray(ref_positions_angstrom, dtype=np.float64)
    if reference is None:
        if radius_angstrom is None:
            raise ValueError("forward_metrics needs reference or radius_angstrom")
        reference = ReferenceSummary.from_particle(zg, xg, radius_angstrom=radius_angstrom)
    reason = check_forward_prediction(pred_numbers, pred_positions_angstrom)
    if reason is None:
        reason = check_prediction_size(len(np.asarray(pred_numbers)), reference.n_atoms)
    if reason is not None:
        return forward_failure(reason, reference, tolerances_angstrom=tolerances_angstrom)
    zp = np.asarray(pred_numbers, dtype=np.int64)
    xp = np.asarray(pred_positions_angstrom, dtype=np.float64)
    n_p, n_g = len(zp), len(zg)
    r_max = reference.r_max_angstrom
    n_bins = len(reference.pair_counts)
    # first the pair histogram, bounded: a cloud denser than matter fails before its n²/2
    # pairs (and its degenerate pairing) are paid for
    from c2np.limits import effective

    neighbours = effective("prediction_neighbours")
    try:
        counts_p = pair_distance_counts(xp, r_max_angstrom=r_max, n_bins=n_bins,
                                        max_pairs=int(neighbours * n_p / 2.0))
    except TooManyPairs:
        reason = (f"more than {neighbours:g} neighbours per predicted atom within {r_max:g} Å on average, "
                  f"denser than any solid (limit prediction_neighbours; raise it with "
                  f"`c2np --limit prediction_neighbours=N`)")
        return forward_failure(reason, reference, tolerances_angstrom=tolerances_angstrom)

    # exact nearest neighbours both ways (all atoms): Hausdorff and Chamfer
    d_pg, _ = nearest_neighbours(xp, xg)
    d_gp, _ = nearest_neighbours(xg, xp)
    hausdorff = float(max(d_pg.max(), d_gp.max()))
    chamfer = float(0.5 * (d_pg.mean() + d_gp.mean()))

    tol_max = float(max(tolerances_angstrom))
    matched = {t: 0 for t in tolerances_angstrom}
    sq_sum = 0.0
    sq_lower = 0.0
    n_pairs = 0
    certified = True
    elements = np.intersect1d(np.unique(zp), np.unique(zg))
    for z in elements:
        ip = np.flatnonzero(zp == z)
        ig = np.flatnonzero(zg == z)
        pred_small = len(ip) <= len(ig)
        small, large = (xp[ip], xg[ig]) if pred_small else (xg[ig], xp[ip])
        # one grid of the larger side gives the close pairs (F1) and the nearest
        # neighbours (matched RMSD; searched there only when the pairing needs them)
        grid = PointGrid.build(large, min_side=tol_max * (1.0 + 1e-6))
        si, lj, dv = close_pairs(small, grid, tol_max)
        # a larger-set atom is at least its nearest distance to the other particle's atoms
        # of any element from this element's atoms: the bound of a degenerate pairing
        # without a second search (docs/decisions/0030-matched-rmsd-certified-gap.md)
        res = min_sq_assignment(small, large, large_grid=grid,
                                column_floor=d_gp[ig] if pred_small else d_pg[ip])
        sq_sum += res.sum_sq_angstrom2
        sq_lower += res.lower_bound_angstrom2
        n_pairs += res.n_pairs
        certified &= res.exact
        for t in tolerances_angstrom:
            sel = dv < t  # the pairs come sorted by the smaller side's atom: CSR directly
            matched[t] += _matching_size(si[sel], lj[sel], len(small), len(large))

    diameter = 2.0 * reference.radius_angstrom
    matched_rmsd = math.sqrt(sq_sum / n_pairs) if n_pairs else diameter
    matched_rmsd_lower = math.sqrt(max(sq_lower, 0.0) / n_pairs) if n_pairs else diameter
    paper_rmsd = math.sqrt(sq_sum / (3 * n_pairs)) if n_pairs else diameter / math.sqrt(3.0)

    v_p = hull_volume_angstrom3(xp)
    v_g = reference.hull_volume_angstrom3

    values: dict[str, float] = {}
    for t in tolerances_angstrom:
        tag = _tol_tag(t)
        m = matched[t]
        values[f"f1@{tag}"] = 2.0 * m / (n_p + n_g)
        values[f"precision@{tag}"] = m / n_p
        values[f"recall@{tag}"] = m / n_g
    values.update({
        "count_error": abs(n_p - n_g) / n_g,
        "composition_distance": composition_distance(zp, zg),
        "hausdorff": hausdorff,
        "chamfer": chamfer,
        "matched_rmsd": matched_rmsd,
        "hull_volume_rel_error": abs(v_p - v_g) / v_g if v_g > 0 else float(v_p > 0),
        "hull_volume_ratio": hull_volume_ratio(v_p, v_g),
        "volume_ratio_sphere_paper": v_p / reference.sphere_volume_angstrom3,
        "pair_distance_error": pair_distance_error(counts_p, n_p, reference.pair_counts, n_g),
        "paper_rmsd": paper_rmsd,
        "paper_hausdorff": hausdorff,
        "paper_abs_delta_hull_volume": abs(v_p - v_g),
        "paper_rdf_energy": rdf_energy(counts_p, reference.pair_counts, r_max_angstrom=r_max),
    })
    details = {"n_pred": n_p, "n_ref": n_g, "n_matched_pairs": n_pairs,
               "matched_rmsd_certified": bool(certified),
               "matched_rmsd_lower_bound": matched_rmsd_lower,
               "matched_rmsd_gap": matched_rmsd - matched_rmsd_lower,
               "hull_volume_pred_angstrom3": v_p}
    bad = [k for k, v in values.items() if not math.isfinite(v)]
    if bad:  # never a non-finite number in a results file: the sample fails instead
        return forward_failure(f"metric {bad[0]} is not finite", reference, tolerances_angstrom=tolerances_angstrom)
    return Scores(values=values, ok=True, details=details)
