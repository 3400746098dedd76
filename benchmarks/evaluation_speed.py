"""Scoring many predictions: baseline predictions files to time ``c2np evaluate`` on, and a
sample-by-sample comparison of two versions of the scorer.

Commands (each takes ``--help``):

* ``predictions``: baseline predictions (random ball, analytic carve, a collapsed ball) of a
  store's ID and OOD eval subsets as HDF5 files, per split and joined, to time
  ``c2np evaluate --split id/ood/test`` on;
* ``compare``: two task-1 results files of the same predictions (the previous and this version
  of the scorer): every per-sample value must be identical except the matched RMSD where a
  file reports it as uncertified (then both must respect both certified bounds); prints the
  largest change and exits 1 when anything else differs;
* ``score``: ``c2np evaluate`` of one predictions file with this version and with the ``src``
  of an earlier checkout (the reference), in turns: wall and CPU seconds side by side as
  ratios, and the two results compared as ``compare`` does.

    PYTHONPATH=src python benchmarks/evaluation_speed.py predictions STORE OUT_DIR [--models ball,carve]
    PYTHONPATH=src python benchmarks/evaluation_speed.py compare OLD.json NEW.json
    PYTHONPATH=src python benchmarks/evaluation_speed.py score STORE PRED.h5 --split id --against /tmp/prev/src
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
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
    (the matched RMSD's aligned path)."""
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


# --- score: c2np evaluate, this version against an earlier one -----------------------------------
def _evaluate_once(src: Path, args: argparse.Namespace, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds (the child's, workers included) of one ``c2np evaluate`` run with
    ``c2np`` imported from ``src``, results written to ``out``."""
    import resource
    import subprocess

    cmd = [sys.executable, "-m", "c2np", "evaluate", "--store", args.store, "--task", "forward",
           "--predictions", args.predictions, "--split", args.split, "--per-group", str(args.per_group),
           "--workers", str(args.workers), "--no-progress", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"c2np evaluate with {src} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def score_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Time c2np evaluate of one task-1 predictions file with this "
                                 "version and with the src folder of an earlier checkout (the reference), "
                                 "in turns, and compare their results sample by sample.")
    ap.add_argument("store")
    ap.add_argument("predictions")
    ap.add_argument("--against", required=True, metavar="DIR", help="src folder of an earlier checkout")
    ap.add_argument("--split", default="id")
    ap.add_argument("--per-group", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    versions = {"earlier": Path(args.against).resolve(), "this": Path(__file__).resolve().parents[1] / "src"}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in versions}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            order = list(versions) if rep % 2 == 0 else list(reversed(versions))
            for name in order:
                times[name].append(_evaluate_once(versions[name], args, Path(tmp) / f"{name}.json"))
        docs = {k: json.loads((Path(tmp) / f"{k}.json").read_text()) for k in versions}
    diff = compare(docs["earlier"], docs["this"])
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}
    print(f"c2np evaluate, {diff['samples']} samples, median of {args.repeats} (turns), {args.workers} worker(s)\n")
    print("| version | wall s | CPU s | wall ratio | CPU ratio |")
    print("|---|---:|---:|---:|---:|")
    for k in versions:
        print(f"| {k} | {med[k][0]:.2f} | {med[k][1]:.2f} | {med[k][0] / med['earlier'][0]:.3f} "
              f"| {med[k][1] / med['earlier'][1]:.3f} |")
    print(f"\nmetrics differing (other than uncertified matched RMSD): {diff['other_metrics_differing'] or 'none'}; "
          f"matched RMSD changed on {diff['matched_rmsd_changed']}, inconsistent on "
          f"{diff['matched_rmsd_inconsistent']}")
    return int(bool(diff["other_metrics_differing"]) or diff["matched_rmsd_inconsistent"] > 0)


COMMANDS = {
    "predictions": (predictions_main, "baseline predictions files to score"),
    "compare": (compare_main, "two results files of the same predictions"),
    "score": (score_main, "c2np evaluate, this version against an earlier one"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=sorted(COMMANDS), help="; ".join(f"{k}: {v[1]}" for k, v in COMMANDS.items()))
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the command's own options (COMMAND --help)")
    a = ap.parse_args(argv)
    sys.argv[0] = f"{ap.prog} {a.command}"     # the command's own usage line names it
    return int(COMMANDS[a.command][0](a.args) or 0)


if __name__ == "__main__":
    sys.exit(main())
