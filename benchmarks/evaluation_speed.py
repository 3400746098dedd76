"""Scoring many predictions: baseline predictions files to time ``c2np evaluate`` on, and a
sample-by-sample comparison of two versions of the scorer.

Commands (each takes ``--help``):

* ``predictions``: baseline predictions (random ball, analytic carve, a collapsed ball) of a
  store's ID and OOD eval subsets as HDF5 files, per split and joined, to time
  ``c2np evaluate --split id/ood/test`` on;
* ``compare``: two task-1 results files of the same predictions (the previous and this version
  of the scorer): every per-sample value must be identical except the matched RMSD where a
  file reports it as uncertified (then both must respect both certified bounds); prints the
  largest change and exits 1 when anything else differs.

    PYTHONPATH=src python benchmarks/evaluation_speed.py predictions STORE OUT_DIR [--models ball,carve]
    PYTHONPATH=src python benchmarks/evaluation_speed.py compare OLD.json NEW.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from c2np.baselines import analytic_carve, predict, random_ball
from c2np.executor import LocalExecutor
from c2np.particle import Particle
from c2np.predictions import write_forward_predictions_h5
from c2np.store import DatasetStore
from c2np.tasks import ForwardQuery, ForwardTask


# --- predictions: baseline predictions files to score --------------------------------------------
def collapsed(query: ForwardQuery, *, seed: int = 0) -> Particle:
    """A collapsed prediction: the random ball's atoms shrunk into 1 Å of the centre (the
    costliest kind per R = 30 particle in ``metrics_speed.py``)."""
    ball = random_ball(query, seed=seed)
    return Particle(ball.numbers, ball.positions_angstrom / query.radius_angstrom)


def shrunk(query: ForwardQuery, *, seed: int = 0) -> Particle:
    """A prediction of the wrong size: the random ball's atoms shrunk to 0.6 of the radius
    (the matched RMSD's aligned path, docs/evaluation.md "Ninth pass")."""
    ball = random_ball(query, seed=seed)
    return Particle(ball.numbers, 0.6 * ball.positions_angstrom)


MODELS = {"ball": random_ball, "carve": analytic_carve, "collapsed": collapsed, "shrunk": shrunk}


def predictions_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("out", type=Path)
    ap.add_argument("--models", default="ball", help="comma-separated: ball, carve, collapsed, shrunk")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    store = DatasetStore.open(args.store)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        joined = {}
        with LocalExecutor(args.workers) as ex:
            for split in ("id", "ood"):
                preds = predict(ForwardTask(store, split, "eval"), MODELS[name], executor=ex)
                write_forward_predictions_h5(args.out / f"{name}_{split}.h5", preds)
                joined.update(preds)
                print(f"{name} {split}: {len(preds)} samples", flush=True)
        write_forward_predictions_h5(args.out / f"{name}_test.h5", joined)
    return 0



# --- compare: two results files of the same predictions ------------------------------------------
RMSD_KEYS = ("matched_rmsd", "paper_rmsd")


def _bounds(doc: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """sample id -> (value, certified lower bound) of the uncertified matched RMSDs."""
    return {b["sample_id"]: (float(b["matched_rmsd_angstrom"]), float(b["lower_bound_angstrom"]))
            for b in doc.get("matched_rmsd_bounds", [])}


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Differences between two results documents (see the module docstring)."""
    so, sn = old["samples"], new["samples"]
    if so["sample_id"] != sn["sample_id"]:
        raise SystemExit("the files score different samples (or in another order)")
    keys = [k for k in so if k not in ("sample_id",)]
    other_diff = {k: sum(a != b for a, b in zip(so[k], sn[k])) for k in keys if k not in RMSD_KEYS}
    bo, bn = _bounds(old), _bounds(new)
    changed = inconsistent = 0
    max_change = max_rel_change = 0.0
    for i, sid in enumerate(so["sample_id"]):
        a, b = so["matched_rmsd"][i], sn["matched_rmsd"][i]
        if a == b:
            continue
        changed += 1
        lb_a = bo.get(sid, (a, a))[1]
        lb_b = bn.get(sid, (b, b))[1]
        tol = 1e-9 * (1.0 + max(a, b))
        if sid not in bo and sid not in bn or a < lb_b - tol or b < lb_a - tol:
            inconsistent += 1
        max_change = max(max_change, abs(a - b))
        max_rel_change = max(max_rel_change, abs(a - b) / max(min(a, b), 1e-300))
    gaps = [v - lb for v, lb in bn.values()]
    rel = [v / lb - 1.0 for v, lb in bn.values() if lb > 0]
    return {"samples": len(so["sample_id"]), "other_metrics_differing": {k: v for k, v in other_diff.items() if v},
            "matched_rmsd_changed": changed, "matched_rmsd_inconsistent": inconsistent,
            "matched_rmsd_max_change_angstrom": max_change,
            "matched_rmsd_max_rel_change": max_rel_change,
            "uncertified_old": len(bo), "uncertified_new": len(bn),
            "max_gap_old_angstrom": max((v - lb for v, lb in bo.values()), default=0.0),
            "max_gap_new_angstrom": max(gaps, default=0.0),
            "max_rel_gap_new": max(rel, default=0.0),
            "median_rel_gap_new": sorted(rel)[len(rel) // 2] if rel else 0.0,
            "harness_seconds": (old.get("seconds"), new.get("seconds"))}


def compare_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    args = ap.parse_args(argv)
    with open(args.old) as f:
        old = json.load(f)
    with open(args.new) as f:
        new = json.load(f)
    out = compare(old, new)
    for k, v in out.items():
        print(f"{k}: {v:.6g}" if isinstance(v, float) and math.isfinite(v) else f"{k}: {v}")
    return int(bool(out["other_metrics_differing"]) or out["matched_rmsd_inconsistent"] > 0)



COMMANDS = {
    "predictions": (predictions_main, "baseline predictions files to score"),
    "compare": (compare_main, "two results files of the same predictions"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=sorted(COMMANDS), help="; ".join(f"{k}: {v[1]}" for k, v in COMMANDS.items()))
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the command's own options (COMMAND --help)")
    a = ap.parse_args(argv)
    return int(COMMANDS[a.command][0](a.args) or 0)


if __name__ == "__main__":
    sys.exit(main())
