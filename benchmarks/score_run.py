"""Score one trained task-1 run through the harness beside the three reference baselines, on
the same rows: the harness's seeded ``eval`` rotations (``--per-group`` of them per material
and R; the harness's own subset has 8) of the ID and OOD splits of a store.

For each split: ``c2np.models.training.predict`` samples the run (its best checkpoint) and
writes the predictions file; ``c2np.tasks.ForwardTask(store, split, 'eval',
per_group=k).evaluate`` scores it (the code of ``c2np evaluate``: metrics, failure rule, 95 %
percentile bootstrap); the analytic carve, memorisation and the random ball
(``c2np.baselines``, fitted on the task's training examples) answer the same queries.

    python benchmarks/score_run.py --store c2np_out/fit/store_paper.h5 \\
        --run pretrained/diffcsp-forward --per-group 1 --steps 100 --out c2np_out/fit/score

Writes ``OUT/score.json`` and ``OUT/score.md`` (mean [95 % CI] per metric and split, n /
failed, sampling particles/s and atoms/s of the run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

METRICS = ("f1@0.5", "f1@0.1", "chamfer", "count_error")
REFERENCE = {"analytic-carve": "analytic carve (ceiling)", "memorisation": "memorisation (nearest train R)",
             "random-ball": "random ball (floor)"}


def _summary(res: Any) -> dict[str, Any]:
    ov = res.overall
    return {"n": int(res.data["n_samples"]), "n_failed": int(res.n_failed),
            **{m: {"mean": ov[m]["mean"], "ci95": ov[m]["ci95"]} for m in METRICS}}


def _cell(rec: dict[str, Any], m: str) -> str:
    lo, hi = rec[m]["ci95"]
    return f"{rec[m]['mean']:.3g} [{lo:.3g}, {hi:.3g}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, help="dataset store (.h5) the run was trained on")
    ap.add_argument("--run", required=True, help="run folder (c2np train)")
    ap.add_argument("--splits", default="id,ood")
    ap.add_argument("--per-group", type=int, default=1, help="eval rotations per (material, R)")
    ap.add_argument("--steps", type=int, default=None, help="sampling steps (default: the run's config)")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--allow-other-store", action="store_true",
                    help="score on a store other than the run's (e.g. a subset of its materials; recorded)")
    args = ap.parse_args()

    import torch

    from c2np.baselines import FORWARD_BASELINES
    from c2np.baselines import predict as baseline_predict
    from c2np.errors import C2NPInputError
    from c2np.models.training import predict
    from c2np.predictions import iter_forward_predictions
    from c2np.store import DatasetStore
    from c2np.tasks import ForwardTask

    torch.set_num_threads(args.threads)
    store = DatasetStore.open(args.store)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model_name = json.loads((Path(args.run) / "config.json").read_text())["model"]
    results: dict[str, Any] = {}
    for split in args.splits.split(","):
        task = ForwardTask(store, split, "eval", per_group=args.per_group)
        for name, fit in FORWARD_BASELINES.items():
            model = fit(task)

            def answer(q: Any, model: Any = model) -> Any:
                try:
                    return model(q)
                except C2NPInputError:  # no answer: scored as a failure
                    return None
            results.setdefault(name, {})[split] = _summary(task.evaluate(baseline_predict(task, answer), model=name))
        pred = out / f"pred_{model_name}_{split}.extxyz"
        t0 = time.perf_counter()
        summ = predict(args.run, store, split, pred, per_group=args.per_group, steps=args.steps, progress=False,
                       allow_other_store=args.allow_other_store)
        dt = time.perf_counter() - t0
        res = task.evaluate(pred, model=model_name)
        n_atoms = sum(len(z) for _, _, z, _ in iter_forward_predictions(pred))
        results.setdefault(model_name, {})[split] = {**_summary(res), "seconds": dt,
                                                     "particles_per_s": summ["n_samples"] / max(dt, 1e-9),
                                                     "atoms_per_s": n_atoms / max(dt, 1e-9),
                                                     "checkpoint": summ["checkpoint"],
                                                     "store_check": summ["store_check"]}
        print(f"{split}: {model_name} F1@0.5 {_cell(results[model_name][split], 'f1@0.5')} "
              f"({summ['n_samples']} particles in {dt:.0f} s)", flush=True)
    splits = args.splits.split(",")
    head = "| model | " + " | ".join(f"{m} {s}" for s in splits for m in METRICS) + " | n / failed |"
    lines = [head, "|" + "---|" * (2 + len(splits) * len(METRICS))]
    for name in [*FORWARD_BASELINES, model_name]:
        label = REFERENCE.get(name, f"{name} (learned generator)")
        cells = [_cell(results[name][s], m) for s in splits for m in METRICS]
        nf = " / ".join(f"{results[name][s]['n']}/{results[name][s]['n_failed']}" for s in splits)
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {nf} |")
    for s in splits:
        r = results[model_name][s]
        lines.append(f"\n{model_name} sampling, {s}: {r['particles_per_s']:.3g} particles/s, "
                     f"{r['atoms_per_s']:.3g} atoms/s ({args.threads} thread(s), {r['seconds']:.0f} s)")
    text = "\n".join(lines)
    (out / "score.md").write_text(text + "\n")
    (out / "score.json").write_text(json.dumps({"run": args.run, "store": args.store, "per_group": args.per_group,
                                                "steps": args.steps, "results": results}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
