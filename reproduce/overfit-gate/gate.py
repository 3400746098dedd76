"""The overfit gate at benchmark size: every paper family trained on ONE particle (KMgH3 of
the shipped catalog, R = 8 Å by default, a seeded paper-protocol rotation) must reproduce it.

Prints a table: family, optimiser steps, training and sampling seconds, atom F1@0.5 mean and
standard deviation over ``--samples`` (>= 8) samples of the training condition, F1@0.1 and
count error — all from the harness's per-sample metric code (``c2np.metrics.forward_metrics``
through ``c2np.models.overfit.overfit``) — and whether the family passes (F1@0.5 >= 0.9).

    python reproduce/overfit-gate/gate.py                       # all five families, R = 8 Å
    python reproduce/overfit-gate/gate.py --models diffcsp --radius 6 --steps 1500
    python reproduce/overfit-gate/gate.py --json results.json   # also write the rows
    python reproduce/overfit-gate/gate.py --models adit --radius 4.5 --hidden 48 --steps 2000  # a CI-size row

Single-threaded (``torch.set_num_threads(1)``) so the times are per core.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

PAPER_FAMILIES = ("cdvae", "diffcsp", "flowmm", "mattergen", "adit")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(PAPER_FAMILIES), help="comma-separated families")
    ap.add_argument("--material", default="KMgH3", help="catalog material (default KMgH3)")
    ap.add_argument("--radius", type=float, default=8.0, help="sphere radius R in Å (default 8)")
    ap.add_argument("--steps", type=int, default=None, help="optimiser steps (default: the gate's per family)")
    ap.add_argument("--samples", type=int, default=8, help="samples of the training condition (>= 8)")
    ap.add_argument("--sample-steps", type=int, default=None, help="sampler steps (default: the config's)")
    ap.add_argument("--config", default="small", help="config preset the gate starts from (default small)")
    ap.add_argument("--hidden", type=int, default=None, help="hidden size (default: the preset's; the CI gate uses 48)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override after the gate's own (repeatable; as `c2np train --set`)")
    args = ap.parse_args()

    import torch

    from c2np.catalog import get_cell
    from c2np.models.config import parse_overrides
    from c2np.models.overfit import GATE_F1, gate_condition, gate_config, gate_steps, overfit

    if args.samples < 8:
        print("--samples must be >= 8", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    cond, target = gate_condition(get_cell(args.material), args.radius, seed=args.seed)
    print(f"overfit gate: {args.material} R = {args.radius:g} Å, {target.n_atoms} atoms, "
          f"{args.samples} samples, config {args.config}, 1 thread", flush=True)
    rows = []
    header = "| family | steps | train s | sample s | F1@0.5 mean | F1@0.5 std | F1@0.1 | count err | gate |"
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    overrides = {**({"hidden": args.hidden} if args.hidden else {}), **parse_overrides(args.overrides)}
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        cfg = gate_config(name, args.config, **overrides)
        steps = args.steps or gate_steps(name)
        r = overfit(name, cfg, cond, target, steps=steps, n_samples=args.samples,
                    sample_steps=args.sample_steps, seed=args.seed)
        ok = r.f1_mean >= GATE_F1
        row = {"model": name, "material": args.material, "radius_angstrom": args.radius,
               "n_atoms": r.n_atoms, "steps": r.steps, "train_seconds": r.train_seconds,
               "sample_seconds": r.sample_seconds, "f1_0p5": list(r.f1), "f1_0p5_mean": r.f1_mean,
               "f1_0p5_std": r.f1_std, "f1_0p1_mean": sum(r.f1_0p1) / len(r.f1_0p1),
               "count_error_mean": sum(r.count_error) / len(r.count_error), "passes": ok,
               "config": cfg.to_dict()}
        rows.append(row)
        line = (f"| {name} | {r.steps} | {r.train_seconds:.0f} | {r.sample_seconds:.0f} | {r.f1_mean:.3f} | "
                f"{r.f1_std:.3f} | {row['f1_0p1_mean']:.3f} | {row['count_error_mean']:.3f} | "
                f"{'pass' if ok else 'FAIL'} |")
        lines.append(line)
        print(line, flush=True)
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(r["passes"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
