"""Which atoms a task-1 prediction misses, and why: a per-atom diagnosis against the
reference particle (a diagnosis, not a model: it reads the reference).

Per particle (:func:`diagnose`): predicted and true atom counts, the F1 of the harness's
one-to-one matching and the F1 the predicted count alone allows (``2 min(n_pred, n_true) /
(n_pred + n_true)``). Every reference atom without a partner within the tolerance (same
species, one to one) is a *hole*, with its depth below the sphere (R - |x|, Å); every unmatched
predicted atom is classified, in this order:

* ``double``: its nearest same-species reference atom lies within the tolerance but is taken;
* ``outside-site``: it sits (within the tolerance) on a lattice site of the crystal outside R
  (a boundary decision);
* ``wrong-species``: it sits on a site inside R of another species;
* ``off-site``: no lattice site within the tolerance.

The lattice sites near the sphere are the caller's (e.g. the condition carved at R + 3 Å).
:func:`summarise` aggregates many diagnoses: how much of the F1 lost is the count's and how
much the choice of sites.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from c2np.metrics import tolerance_matching

__all__ = ["MISS_KINDS", "DEPTH_EDGES_ANGSTROM", "ParticleMisses", "diagnose", "summarise"]

#: the kinds of unmatched predicted atoms, in the order they are tested
MISS_KINDS = ("double", "outside-site", "wrong-species", "off-site")
#: depth bins (Å below the sphere) of the holes table
DEPTH_EDGES_ANGSTROM = (0.0, 0.5, 1.0, 2.0, 3.0, np.inf)


@dataclass(frozen=True)
class ParticleMisses:
    """Per-atom diagnosis of one prediction: counts, F1, and the unmatched atoms.

    Attributes:
        n_pred, n_true, n_matched: predicted, reference and matched atom counts.
        hole_depth_angstrom, hole_z: R - |x| (Å) and species of unmatched reference atoms.
        extra_kind, extra_z, extra_r_over_r, extra_site_out_angstrom: kind (:data:`MISS_KINDS`),
            species, |x| / R and (outside-site only, else NaN) |site| - R (Å) of unmatched
            predicted atoms.
        ref_depth_angstrom: R - |x| (Å) of every reference atom (the base rate).
    """

    n_pred: int
    n_true: int
    n_matched: int
    hole_depth_angstrom: np.ndarray
    hole_z: np.ndarray
    extra_kind: tuple[str, ...]
    extra_z: np.ndarray
    extra_r_over_r: np.ndarray
    extra_site_out_angstrom: np.ndarray
    ref_depth_angstrom: np.ndarray

    @property
    def f1(self) -> float:
        """F1 of the one-to-one matching (equals the harness's F1 at the same tolerance)."""
        return 2.0 * self.n_matched / max(self.n_pred + self.n_true, 1)

    @property
    def f1_count_bound(self) -> float:
        """The F1 the predicted count allows at best."""
        return 2.0 * min(self.n_pred, self.n_true) / max(self.n_pred + self.n_true, 1)


def diagnose(pred_z: np.ndarray, pred_x_angstrom: np.ndarray, ref_z: np.ndarray, ref_x_angstrom: np.ndarray,
             site_z: np.ndarray, site_x_angstrom: np.ndarray, radius_angstrom: float, *,
             tol_angstrom: float = 0.5) -> ParticleMisses:
    """Match predicted to reference atoms (same species, within ``tol_angstrom``, one to one:
    :func:`c2np.metrics.tolerance_matching`, the harness's F1 matching) and classify the
    unmatched atoms of both (see the module). ``site_*``:
    the crystal's sites near the sphere (inside and just outside R), positions (n, 3) Å."""
    from scipy.spatial import cKDTree

    pz, px = np.asarray(pred_z), np.asarray(pred_x_angstrom, dtype=float).reshape(-1, 3)
    rz, rx = np.asarray(ref_z), np.asarray(ref_x_angstrom, dtype=float).reshape(-1, 3)
    R = float(radius_angstrom)
    partner = tolerance_matching(pz, px, rz, rx, tolerance_angstrom=tol_angstrom)  # the harness's F1 matching
    matched = partner >= 0
    taken = np.zeros(len(rz), dtype=bool)
    taken[partner[matched]] = True
    near_ref = np.zeros(len(pz), dtype=bool)  # within the tolerance of a same-species reference atom
    for z in np.intersect1d(np.unique(pz), np.unique(rz)):
        ip, ig = np.flatnonzero(pz == z), np.flatnonzero(rz == z)
        near_ref[ip] = cKDTree(rx[ig]).query(px[ip])[0] < tol_angstrom
    ds, js = cKDTree(np.asarray(site_x_angstrom, dtype=float).reshape(-1, 3)).query(px) if len(px) else (
        np.zeros(0), np.zeros(0, dtype=int))
    site_r = np.linalg.norm(np.asarray(site_x_angstrom, dtype=float).reshape(-1, 3), axis=1)
    kinds: list[str] = []
    out_by: list[float] = []
    for i in np.flatnonzero(~matched):
        on_site = ds[i] < tol_angstrom
        if near_ref[i]:
            kinds.append("double")
        elif on_site and site_r[js[i]] > R + 1e-3:
            kinds.append("outside-site")
        elif on_site:
            kinds.append("wrong-species" if site_z[js[i]] != pz[i] else "double")
        else:
            kinds.append("off-site")
        out_by.append(float(site_r[js[i]] - R) if kinds[-1] == "outside-site" else np.nan)
    extra = np.flatnonzero(~matched)
    ref_depth = R - np.linalg.norm(rx, axis=1)
    return ParticleMisses(
        n_pred=len(pz), n_true=len(rz), n_matched=int(matched.sum()), hole_depth_angstrom=ref_depth[~taken],
        hole_z=rz[~taken], extra_kind=tuple(kinds), extra_z=pz[extra],
        extra_r_over_r=np.linalg.norm(px[extra], axis=1) / R, extra_site_out_angstrom=np.asarray(out_by),
        ref_depth_angstrom=ref_depth)


def summarise(results: list[tuple[str, float, ParticleMisses]]) -> dict[str, Any]:
    """Aggregate tables (JSON-able) of per-particle diagnoses ``(sample id, R in Å, misses)``:
    mean F1, the F1 lost to the count and to the choice of sites, counts by kind, holes by
    depth below the sphere."""
    out: dict[str, Any] = {"n_particles": len(results)}
    f1 = np.array([m.f1 for _, _, m in results])
    bound = np.array([m.f1_count_bound for _, _, m in results])
    npred = np.array([m.n_pred for _, _, m in results])
    ntrue = np.array([m.n_true for _, _, m in results])
    out["f1"] = float(f1.mean())
    out["f1_count_bound"] = float(bound.mean())
    out["loss"] = float(1 - f1.mean())
    out["loss_from_count"] = float(1 - bound.mean())
    out["loss_from_site_choice"] = float(bound.mean() - f1.mean())
    out["count_error"] = float(np.mean(np.abs(npred - ntrue) / ntrue))
    out["count_sign"] = {k: {"n": int(m.sum()), "f1": float(f1[m].mean()) if m.any() else None,
                             "f1_count_bound": float(bound[m].mean()) if m.any() else None}
                         for k, m in (("under", npred < ntrue), ("exact", npred == ntrue), ("over", npred > ntrue))}
    kinds = Counter(k for _, _, m in results for k in m.extra_kind)
    n_extra = sum(kinds.values())
    n_holes = int(sum(len(m.hole_z) for _, _, m in results))
    out["atoms"] = {"reference": int(ntrue.sum()), "predicted": int(npred.sum()), "holes": n_holes,
                    "unmatched_predicted": n_extra,
                    "unmatched_predicted_by_kind": {k: int(kinds[k]) for k in MISS_KINDS}}
    depth_all = np.concatenate([m.ref_depth_angstrom for _, _, m in results])
    depth_h = np.concatenate([m.hole_depth_angstrom for _, _, m in results])
    edges = np.asarray(DEPTH_EDGES_ANGSTROM)
    na, _ = np.histogram(depth_all, edges)
    nh, _ = np.histogram(depth_h, edges)
    out["holes_by_depth"] = [{"depth_angstrom": [float(edges[i]), float(edges[i + 1])], "reference_atoms": int(na[i]),
                              "holes": int(nh[i]), "hole_rate": float(nh[i] / max(na[i], 1))} for i in range(len(na))]
    out_by = np.concatenate([m.extra_site_out_angstrom for _, _, m in results]) if results else np.zeros(0)
    out_by = out_by[np.isfinite(out_by)]
    out["outside_site_beyond_r_angstrom"] = ({"median": float(np.median(out_by)),
                                              "p90": float(np.quantile(out_by, 0.9)),
                                              "max": float(out_by.max())} if len(out_by) else None)
    r_extra = np.concatenate([m.extra_r_over_r[[k == "off-site" for k in m.extra_kind]] for _, _, m in results])
    out["off_site_r_over_r"] = ({"median": float(np.median(r_extra)), "p10": float(np.quantile(r_extra, 0.1)),
                                 "p90": float(np.quantile(r_extra, 0.9))} if len(r_extra) else None)
    return out
