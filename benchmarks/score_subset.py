"""Score a task-1 predictions file through the harness on the eval rows of another (smaller)
store: the predictions of those rows only, by sample id (e.g. the 21-material rows of
docs/model_results.md out of a run sampled on the 82-material store; a (material, R)'s eval
rotations depend on the seed and R only, so the ids and rotations coincide; the script
checks that every row's quaternion matches).

    PYTHONPATH=src python benchmarks/score_subset.py --store c2np_out/score12/store_main.h5 \\
        --split ood --per-group 1 --pred c2np_out/score_mg82/store_paper/pred_mattergen_ood.extxyz

Prints the harness's mean [95 % CI] of F1@0.5, F1@0.1, matched RMSD and count error, and
n / failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, help="the store whose eval rows are scored")
    ap.add_argument("--split", required=True)
    ap.add_argument("--per-group", type=int, default=1)
    ap.add_argument("--pred", required=True, help="predictions file (extxyz of c2np predict)")
    ap.add_argument("--from-store", default=None, help="store the predictions were sampled on (checks rotations)")
    ap.add_argument("--model", default="model")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from c2np.particle import Particle
    from c2np.predictions import iter_forward_predictions
    from c2np.store import DatasetStore
    from c2np.tasks import ForwardTask

    store = DatasetStore.open(args.store)
    task = ForwardTask(store, args.split, "eval", per_group=args.per_group)
    queries = {q.sample_id: q for q in task.queries()}
    if args.from_store:
        other = {q.sample_id: q for q in ForwardTask(DatasetStore.open(args.from_store), args.split, "full").queries()
                 if q.sample_id in queries}
        bad = [s for s, q in queries.items() if s not in other or not np.allclose(q.quaternion, other[s].quaternion)]
        if bad:
            print(f"{args.from_store}: rows differ from {args.store} ({bad[:3]})", file=sys.stderr)
            return 1
    preds = {sid: Particle(z, pos) for _, sid, z, pos in iter_forward_predictions(args.pred) if sid in queries}
    res = task.evaluate(preds, model=args.model)
    met = res.data["metrics"]["overall"]
    out = {"n": int(res.data["n_samples"]), "n_failed": int(res.n_failed), "n_predicted": len(preds),
           **{m: {"mean": met[m]["mean"], "ci95": met[m]["ci95"]}
              for m in ("f1@0.5", "f1@0.1", "matched_rmsd", "count_error")}}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        cells = " | ".join(f"{m} {v['mean']:.3g} [{v['ci95'][0]:.3g}, {v['ci95'][1]:.3g}]"
                           for m, v in out.items() if isinstance(v, dict))
        print(f"{args.model} {args.split} on {Path(args.store).name}: {cells} | "
              f"n / failed {out['n']}/{out['n_failed']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
