"""Which atoms a task-1 generator misses, and why: a per-atom diagnosis of a predictions file
against the store's reference particles (a diagnosis, not a model: it reads the references).

Per particle: predicted vs true atom count, the harness's F1@0.5, and the F1 that its count
alone allows (``2 min(n_pred, n_true) / (n_pred + n_true)``: every predicted atom on a distinct
correct site). Every reference atom without a partner within ``--tol`` (same species, one to
one) is a *hole*, with its depth below the sphere (R - |x|, Å) and species; every unmatched
predicted atom is classified, in this order:

* ``double``       its nearest same-species reference atom lies within tol but is taken;
* ``outside-site`` it sits (within tol) on a lattice site of the crystal that lies outside R
                   (a boundary decision; the site's species is recorded);
* ``wrong-species`` it sits on a site inside R of another species;
* ``off-site``     no lattice site within tol.

The lattice sites near the sphere come from carving the condition at R + 3 Å (diagnosis only).

    PYTHONPATH=src python benchmarks/forward_miss_diagnosis.py --store c2np_out/fit/store_paper.h5 \\
        --split ood --per-group 1 --pred c2np_out/score_mg82/store_paper/pred_mattergen_ood.extxyz

``--keep-sited TOL --pred IN --out OUT`` applies the sampler's final ``keep_sited`` rule to a
predictions file. ``--oracle-count RUN --out FILE`` instead samples RUN on the same rows with the *true* atom
count in place of its count head (everything else the run's own sampler, the seeds of
``c2np predict``) and writes a predictions file: how much F1 an exact count would give.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from c2np.metrics import tolerance_matching  # noqa: E402

CATEGORIES = ("double", "outside-site", "wrong-species", "off-site")
DEPTH_EDGES_ANGSTROM = (0.0, 0.5, 1.0, 2.0, 3.0, np.inf)


@dataclass(frozen=True)
class ParticleMisses:
    """Per-atom diagnosis of one prediction: counts, F1, and the unmatched atoms.

    ``hole_depth_angstrom`` / ``hole_z``: R - |x| and species of unmatched reference atoms;
    ``extra_kind`` / ``extra_z`` / ``extra_r_over_r`` / ``extra_site_out_angstrom``: category,
    species, |x| / R and (for outside-site) |site| - R of unmatched predicted atoms;
    ``ref_depth_angstrom``: R - |x| of every reference atom (the base rate)."""

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
    unmatched atoms of both (module docstring). ``site_*``:
    the crystal's sites near the sphere (inside and just outside R), positions (n, 3) Å."""
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


def _species_role(z: int, material_id: str) -> str:
    """'H' for hydrogen; 'A' / 'B' for the first / second element of an ABH3 material's name
    (the perovskite's A and B sites; 'M' for any other element)."""
    from ase.data import chemical_symbols

    names = re.findall(r"[A-Z][a-z]?", material_id)
    sym = chemical_symbols[int(z)]
    if sym == "H":
        return "H"
    return {names[0]: "A", names[1]: "B"}.get(sym, "M") if len(names) >= 2 else "M"


def summarise(results: list[tuple[str, float, ParticleMisses]]) -> dict:
    """Aggregate tables (JSON-able) of per-particle diagnoses (sample id, R, misses)."""
    out: dict = {"n_particles": len(results)}
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
                    "unmatched_predicted_by_kind": {k: int(kinds[k]) for k in CATEGORIES}}
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


def _species_tables(results: list[tuple[str, float, ParticleMisses]], roles: dict[str, dict[int, str]]) -> dict:
    """Holes and unmatched predicted atoms (by kind) per species role (A, B, H)."""
    hole_c: Counter[str] = Counter()
    extra_c: Counter[str] = Counter()
    for sid, _, m in results:
        rl = roles[sid]
        hole_c.update(rl.get(int(z), "?") for z in m.hole_z)
        extra_c.update(f"{rl.get(int(z), '?')}:{k}" for z, k in zip(m.extra_z, m.extra_kind))
    return {"holes": dict(sorted(hole_c.items())), "unmatched_predicted": dict(sorted(extra_c.items()))}


def run_diagnosis(args: argparse.Namespace) -> dict:
    """Diagnose the predictions file of ``args`` on the eval rows (per-R and overall)."""
    from c2np.carving import carve
    from c2np.predictions import iter_forward_predictions
    from c2np.store import DatasetStore
    from c2np.tasks import select_rows

    store = DatasetStore.open(args.store)
    rec = store.recipes
    rows = select_rows(rec, args.split, "eval", per_group=args.per_group)
    preds = {sid: (z, x) for _, sid, z, x in iter_forward_predictions(args.pred)}
    results: list[tuple[str, float, ParticleMisses]] = []
    roles: dict[str, dict[int, str]] = {}
    role_ref: Counter[str] = Counter()
    for row in rows:
        sid = rec.sample_id(int(row))
        if sid not in preds:
            raise SystemExit(f"{args.pred}: no prediction for {sid}")
        ref = store.particle(int(row))
        mat = rec.materials[int(rec.material_index[row])]
        cell = store.cells[mat]
        R = float(rec.radius_angstrom[row])
        sites = carve(cell, R + 3.0, centre_frac=tuple(float(v) for v in rec.centre_frac),
                      quaternion=rec.quaternion[row]).particle
        z, x = preds[sid]
        results.append((sid, R, diagnose(z, x, ref.numbers, ref.positions_angstrom, sites.numbers,
                                         sites.positions_angstrom, R, tol_angstrom=args.tol)))
        roles[sid] = {int(v): _species_role(int(v), mat) for v in np.unique(cell.numbers)}
        role_ref.update(roles[sid][int(v)] for v in ref.numbers)
    out = {"overall": summarise(results), "species": _species_tables(results, roles),
           "reference_by_species": dict(role_ref)}
    out["by_radius"] = {str(R): summarise([r for r in results if r[1] == R]) for R in sorted({r[1] for r in results})}
    out["per_particle"] = [{"sample_id": sid, "R": R, "n_pred": m.n_pred, "n_true": m.n_true, "f1": m.f1,
                            "f1_count_bound": m.f1_count_bound, "holes": len(m.hole_z),
                            "extra": dict(Counter(m.extra_kind))} for sid, R, m in results]
    return out


def print_report(out: dict) -> None:
    """Markdown tables of :func:`run_diagnosis`'s summary."""
    print("| rows | n | F1@tol | F1 allowed by the count | loss from count | loss from site choice | count error |")
    print("|---|---|---|---|---|---|---|")
    for name, s in [("all", out["overall"])] + [(f"R = {k}", v) for k, v in out["by_radius"].items()]:
        print(f"| {name} | {s['n_particles']} | {s['f1']:.4f} | {s['f1_count_bound']:.4f} | "
              f"{s['loss_from_count']:.4f} | {s['loss_from_site_choice']:.4f} | {s['count_error']:.4f} |")
    o = out["overall"]
    print("\ncount sign:", json.dumps(o["count_sign"]))
    print("atoms:", json.dumps(o["atoms"]))
    print("\n| depth below the sphere (Å) | reference atoms | holes | hole rate |\n|---|---|---|---|")
    for b in o["holes_by_depth"]:
        print(f"| {b['depth_angstrom'][0]}-{b['depth_angstrom'][1]} | {b['reference_atoms']} | {b['holes']} | "
              f"{b['hole_rate']:.4f} |")
    print("\nspecies (A / B sites of ABH3, H):", json.dumps(out["species"]),
          "reference:", json.dumps(out["reference_by_species"]))
    print("outside-site |site| - R (Å):", json.dumps(o["outside_site_beyond_r_angstrom"]))
    print("off-site |x| / R:", json.dumps(o["off_site_r_over_r"]))


def sample_oracle_count(args: argparse.Namespace) -> int:
    """Sample ``args.oracle_count`` on the eval rows with the true atom counts (diagnosis)."""
    import torch

    from c2np.models.data import condition_from_query
    from c2np.models.training import _sample_forward, load_run
    from c2np.predictions import write_forward_predictions
    from c2np.store import DatasetStore
    from c2np.tasks import ForwardTask, select_rows

    store = DatasetStore.open(args.store)
    rec = store.recipes
    rows = select_rows(rec, args.split, "eval", per_group=args.per_group)
    true = {(rec.materials[int(rec.material_index[r])], float(rec.radius_angstrom[r])): store.particle(int(r)).n_atoms
            for r in rows}
    ids = {rec.sample_id(int(r)) for r in rows}
    model, _ = load_run(args.oracle_count)
    items = [(q.sample_id, condition_from_query(q)) for q in ForwardTask(store, args.split, "full").queries()
             if q.sample_id in ids]
    sample = model.sample
    head = model.count_head

    def with_true_counts(conds, g, steps=None):
        want = torch.tensor([true[(c.cell.material_id, float(c.radius_angstrom))] for c in conds])
        head.sample = lambda c, cond=None: want.to(model.device)
        try:
            return sample(conds, g, steps=steps)
        finally:
            del head.sample

    model.sample = with_true_counts
    with torch.no_grad():
        preds = _sample_forward(model, items, args.seed, steps=args.steps, batch=int(model.cfg.batch_size),
                                progress=True, desc="oracle-count sampling")
    write_forward_predictions(args.out, preds)
    print(f"wrote {len(preds)} particles to {args.out}")
    return 0


def apply_keep_sited(args: argparse.Namespace) -> int:
    """Apply the sampler's final ``keep_sited`` rule (``c2np.models.forward.sites``, tolerance
    ``args.keep_sited`` Å) to an existing predictions file: the same particles a sampler with
    ``sample_site_tol_angstrom`` would have returned from the same draws (the rule runs after
    the last step and draws no random numbers)."""
    import torch

    from c2np.models.backbone import collate_conditions
    from c2np.models.data import condition_from_query, species_slots
    from c2np.models.forward.sites import keep_sited
    from c2np.particle import Particle
    from c2np.predictions import iter_forward_predictions, write_forward_predictions
    from c2np.store import DatasetStore
    from c2np.tasks import ForwardTask

    store = DatasetStore.open(args.store)
    queries = {q.sample_id: q for q in ForwardTask(store, args.split, "full").queries()}
    out: dict[str, Particle] = {}
    for _, sid, z, x in iter_forward_predictions(args.pred):
        cond = condition_from_query(queries[sid])
        types = torch.as_tensor(np.searchsorted(species_slots(cond.cell), z))
        u = torch.as_tensor(x / cond.radius_angstrom, dtype=torch.float32)
        ku, kt, _ = keep_sited(u, types, torch.tensor([len(z)]), collate_conditions([cond]),
                               tol_angstrom=args.keep_sited, retype=args.retype)
        kept = np.asarray(species_slots(cond.cell))[kt.numpy()]
        out[sid] = Particle(kept, ku.double().numpy() * cond.radius_angstrom)
    write_forward_predictions(args.out, out)
    print(f"wrote {len(out)} particles to {args.out}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--split", default="ood")
    ap.add_argument("--per-group", type=int, default=1)
    ap.add_argument("--pred", help="predictions file to diagnose")
    ap.add_argument("--tol", type=float, default=0.5, help="matching tolerance (Å), the harness's F1@0.5")
    ap.add_argument("--json", help="write the full diagnosis (per particle too) here")
    ap.add_argument("--oracle-count", metavar="RUN", help="sample RUN with the true counts instead (needs --out)")
    ap.add_argument("--out", help="predictions file written by --oracle-count")
    ap.add_argument("--keep-sited", type=float, metavar="TOL", help="apply keep_sited (TOL Å) to --pred, write --out")
    ap.add_argument("--retype", action="store_true", help="with --keep-sited: type = the nearest site's species")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.oracle_count:
        if not args.out:
            print("--oracle-count needs --out", file=sys.stderr)
            return 2
        return sample_oracle_count(args)
    if args.keep_sited:
        if not (args.pred and args.out):
            print("--keep-sited needs --pred and --out", file=sys.stderr)
            return 2
        return apply_keep_sited(args)
    if not args.pred:
        print("give --pred (or --oracle-count RUN --out FILE)", file=sys.stderr)
        return 2
    out = run_diagnosis(args)
    print_report(out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
