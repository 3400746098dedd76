"""Sample-by-sample comparison of two task-1 results files of the same predictions (e.g. the
previous and this version of the scorer; docs/evaluation.md, "Sixth pass").

Every per-sample value must be identical, except the matched RMSD (``matched_rmsd`` and
``paper_rmsd``), which may differ where either file reports it as uncertified: then both
values must be consistent with both certified bounds (each value at or above the other's
lower bound), and the table gives the largest change and the largest certified gap, in Å
and relative in RMSD. Exit code 1 when anything else differs.

    PYTHONPATH=src python benchmarks/compare_results.py OLD.json NEW.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

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


def main(argv: list[str] | None = None) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
