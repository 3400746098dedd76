"""The faithful task-1 families at reference scale on a GPU, in one call of at most 10 minutes.

Each family in its faithful configuration (category ``learned``; ``c2np.models.faithful``) at
the reference networks' scale (hidden 256, 6 layers, 24 neighbours, 8 heads by default) is
trained on the overfit gate's ONE particle (KMgH3, R = 8 Å, a seeded paper-protocol rotation)
for a fixed wall-clock budget per family (the optimiser steps, and so the cosine schedule, are
sized from a 10-step timing probe), then samples of that condition are drawn with the family's
reference sampler (1,000 steps; ``REFERENCE_SAMPLERS``) and, for the families with a Langevin
corrector, the same sampler without it; every sample is scored with the harness's per-sample
metric code beside the task-1 baselines (analytic carve, memorisation, random ball). A family
that fails on the device (an error, not a score) is a row with its error, never dropped. The
whole run stops training new families once ``--deadline-s`` is near and says which were left.

    python reproduce/faithful/gpu.py --device cuda                 # ~8 minutes on one GPU
    python reproduce/faithful/gpu.py --smoke                       # CPU, tiny, seconds

Writes ``--json`` (default docs/results/faithful_gpu.json) and the generated ``--md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

FAMILIES = ("cdvae", "diffcsp", "flowmm", "mattergen", "adit")
GATE_F1 = 0.9
#: reference scale (the reference networks: CSPNet 512 x 6, GemNet-T 512 x 4, CDVAE 256, DiT 768 x 12)
SCALE: dict[str, Any] = {"hidden": 256, "layers": 6, "knn": 24, "heads": 8, "latent_dim": 16, "dit_layers": 6,
                         "lr": 5e-4, "warmup_steps": 100, "lr_schedule": "cosine", "ema_decay": 0.999,
                         "langevin_levels": 10}
SMOKE: dict[str, Any] = {"hidden": 16, "layers": 1, "knn": 8, "heads": 2, "latent_dim": 8, "dit_layers": 1,
                         "warmup_steps": 0, "langevin_levels": 2}


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_family(family: str, args: argparse.Namespace, cond: Any, target: Any) -> list[dict[str, Any]]:
    """Rows of one family: reference sampler and, where there is one, no corrector."""
    from c2np.models.faithful import REMEDIES, faithful_config, reference_sampler
    from c2np.models.faithful_gate import score_gate_samples, summarise, train_gate_model
    from c2np.models.priors import forward_priors

    cfg = faithful_config(family, "small", **(SMOKE if args.smoke else SCALE), batch_size=args.batch_size)
    priors = forward_priors(family, cfg.to_dict())
    assert not priors, priors
    t0 = time.perf_counter()
    probe = train_gate_model(family, cfg, cond, target, steps=10, seed=args.seed, device=args.device)
    _sync(args.device)
    per_step = max((time.perf_counter() - t0) / 10, 1e-4)
    del probe
    steps = max(10, int(0.95 * args.train_seconds / per_step))
    tm = train_gate_model(family, cfg, cond, target, steps=steps, seed=args.seed, device=args.device,
                          max_seconds=args.train_seconds)
    _sync(args.device)
    ref = reference_sampler(family, cfg)
    samplers = {"reference-sampler": ref}
    if REMEDIES["no-corrector"].applies(family) and ref.get("corrector_steps", cfg.corrector_steps) > 0:
        samplers["no-corrector"] = {**ref, "corrector_steps": 0}
    rows = []
    for name, smp in samplers.items():
        if args.max_sample_steps is not None:
            smp = {**smp, "sample_steps": min(int(smp["sample_steps"]), args.max_sample_steps)}
        res = score_gate_samples(tm, cond, target, sampler=smp, n_samples=args.samples, seed=args.seed,
                                 sample_batch=args.samples)
        f1 = summarise(res["f1@0.5"])
        rows.append({"family": family, "remedy": name, "category": "learned", "priors": [], "device": args.device,
                     "steps": tm.steps, "planned_steps": steps, "seconds_per_step": tm.train_seconds / max(tm.steps, 1),
                     "train_seconds": tm.train_seconds, "sample_seconds": res["sample_seconds"],
                     "sampler": res["sampler"], "f1_0p5": res["f1@0.5"], "f1_0p5_mean": f1["mean"],
                     "f1_0p5_lo": f1["lo"], "f1_0p5_hi": f1["hi"],
                     "f1_0p1_mean": summarise(res["f1@0.1"])["mean"],
                     "count_error_mean": summarise(res["count_error"])["mean"], "passes": f1["mean"] >= GATE_F1,
                     "final_loss": sum(tm.losses[-50:]) / max(1, len(tm.losses[-50:])), "config": cfg.to_dict()})
    return rows


def sampler_text(family: str, sampler: dict[str, Any]) -> str:
    """'steps / corrector rounds' ('-' for a family whose sampler has no corrector)."""
    from c2np.models.faithful import REMEDIES

    corr = sampler["corrector_steps"] if REMEDIES["no-corrector"].applies(family) else "-"
    return f"{sampler['sample_steps']} / {corr}"


def render(data: dict[str, Any]) -> str:
    """The markdown page of the run's JSON."""
    m = data["meta"]
    out = ["# The faithful families at reference scale (GPU path)", "",
           "Generated by `python reproduce/faithful/gpu.py` from its JSON; do not edit.", "",
           f"Device: {m['device_name']}. One particle ({m['material']}, R = {m['radius_angstrom']:g} Å, "
           f"{m['n_atoms']} atoms); each family trained for {m['train_seconds']:g} s of wall clock at hidden "
           f"{m['scale']['hidden']}, {m['scale']['layers']} layers, then {m['samples']} samples scored with the "
           "harness's per-sample metric code. Gate: F1@0.5 >= 0.9.", ""]
    if m.get("smoke"):
        out += ["**Smoke run** (tiny networks, seconds of training, capped sampler): it checks that the path "
                "runs; its numbers say nothing about the families.", ""]
    out += ["| model | sampler | category | device | steps | s / step | sampler steps / corrector | "
            "F1@0.5 [95 % CI] | F1@0.1 | count error | gate |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        if "error" in r:
            out.append(f"| {r['family']} | | learned | {r['device']} | | | | error: {r['error']} | | | FAIL |")
            continue
        ci = f"{r['f1_0p5_mean']:.3f} [{r['f1_0p5_lo']:.3f}, {r['f1_0p5_hi']:.3f}]"
        if r["category"] != "learned":
            out.append(f"| {r['family']} | | {r['category']} | | | | | {ci} | {r['f1_0p1_mean']:.3f} | "
                       f"{r['count_error_mean']:+.3f} | |")
            continue
        out.append(f"| {r['family']} | {r['remedy']} | learned | {r['device']} | {r['steps']} | "
                   f"{r['seconds_per_step']:.3f} | {sampler_text(r['family'], r['sampler'])} | {ci} | "
                   f"{r['f1_0p1_mean']:.3f} | {r['count_error_mean']:+.3f} | {'pass' if r['passes'] else 'FAIL'} |")
    if m.get("left_out"):
        out += ["", f"Not run (the call's deadline): {', '.join(m['left_out'])}."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (default), cpu or auto")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--material", default="KMgH3")
    ap.add_argument("--radius", type=float, default=8.0, help="R in Å (default 8)")
    ap.add_argument("--train-seconds", type=float, default=60.0, help="training wall clock per family (default 60)")
    ap.add_argument("--deadline-s", type=float, default=540.0,
                    help="no new family starts after this many seconds of the run (default 540)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--samples", type=int, default=8, help="samples of the condition (>= 8)")
    ap.add_argument("--max-sample-steps", type=int, default=None, help="cap on sampler steps (smoke runs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=str(ROOT / "docs/results/faithful_gpu.json"))
    ap.add_argument("--md", default=str(ROOT / "docs/results/faithful_gpu.md"))
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny networks, 2 s per family, <= 4 sampler steps")
    args = ap.parse_args(argv)
    if args.smoke:
        args.device, args.train_seconds = "cpu", min(args.train_seconds, 2.0)
        args.max_sample_steps = args.max_sample_steps or 4
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    if [f for f in families if f not in FAMILIES] or args.samples < 8:
        print(f"--families must be among {list(FAMILIES)} and --samples >= 8", file=sys.stderr)
        return 2
    import torch

    from c2np.catalog import get_cell
    from c2np.errors import C2NPInputError
    from c2np.models.faithful_gate import baseline_gate_rows, summarise
    from c2np.models.overfit import gate_condition
    from c2np.models.training import resolve_device

    try:
        dev = resolve_device(args.device)
    except C2NPInputError as e:
        print(str(e), file=sys.stderr)
        return 2
    if dev.type == "cpu":
        torch.set_num_threads(1)
    start = time.perf_counter()
    cond, target = gate_condition(get_cell(args.material), args.radius, seed=args.seed)
    rows: list[dict[str, Any]] = []
    for name, sc in baseline_gate_rows(cond, target, sample_id=f"{args.material}/R{args.radius:g}/gate",
                                       n_samples=args.samples, seed=args.seed).items():
        f1 = summarise(sc["f1@0.5"])
        rows.append({"family": name, "category": "analytic" if name == "analytic-carve" else "baseline",
                     "f1_0p5": sc["f1@0.5"], "f1_0p5_mean": f1["mean"], "f1_0p5_lo": f1["lo"], "f1_0p5_hi": f1["hi"],
                     "f1_0p1_mean": summarise(sc["f1@0.1"])["mean"],
                     "count_error_mean": summarise(sc["count_error"])["mean"]})
    left: list[str] = []
    for fam in families:
        if time.perf_counter() - start > args.deadline_s:
            left.append(fam)
            continue
        print(f"{fam}: training {args.train_seconds:g} s on {dev}", flush=True)
        try:
            new = run_family(fam, argparse.Namespace(**{**vars(args), "device": str(dev)}), cond, target)
        except Exception as e:  # a device failure is a counted row, not a crash of the whole run
            traceback.print_exc()
            err = f"{type(e).__name__}: {e}"[:200]
            new = [{"family": fam, "category": "learned", "device": str(dev), "error": err}]
        rows += new
        for r in new:
            print(f"  {fam} {r.get('remedy', '')}: " + (f"F1@0.5 {r['f1_0p5_mean']:.3f} "
                  f"[{r['f1_0p5_lo']:.3f}, {r['f1_0p5_hi']:.3f}] in {r['steps']} steps" if "error" not in r
                  else r["error"]), flush=True)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU (1 thread)"
    meta = {"device": str(dev), "device_name": name, "material": args.material, "radius_angstrom": args.radius,
            "n_atoms": target.n_atoms, "train_seconds": args.train_seconds, "samples": args.samples,
            "scale": SMOKE if args.smoke else SCALE, "smoke": args.smoke, "left_out": left,
            "wall_seconds": time.perf_counter() - start, "torch": torch.__version__,
            "command": "python reproduce/faithful/gpu.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    data = {"meta": meta, "rows": rows}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(data, indent=1))
    Path(args.md).write_text(render(data))
    print(f"wrote {args.json} and {args.md} ({meta['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
