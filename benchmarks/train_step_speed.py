"""CPU seconds per training step of each task-1 family, the previous code against this code,
interleaved, with the check that both compute the same steps (the shipped task-1 runs take
20,000 steps per family).

A step is what ``c2np train`` does per batch: ``batch_loss`` on ``batch_size`` rows drawn by
the run's numpy generator, then ``optimizer_step`` (backward, clipping, AdamW, schedule, EMA),
with the config shipped in ``PRETRAINED/<family>-forward/config.json``, seed 0, on the real
store rows. Every measurement is a fresh process (``--worker``) that imports ``c2np`` from the
given ``src`` folder, so the two versions run the same script in the same conditions; the
repeats alternate which version goes first. ``adit-dit`` is ADiT's second stage (the latent
DiT, 80 % of its steps): the model starts at the stage boundary.

Each worker first takes ``--check-steps`` steps from the fresh model (also the warm-up) and
records their losses and the weights after them; then it times ``--steps`` more steps
(``time.process_time``, one thread). The table gives the median CPU s/step over the repeats,
the ratio previous / this, and the largest absolute difference of the check losses and of
the weights after them between the versions (0 = bit-identical).

    git archive REV src | tar -x -C /tmp/prev     # the previous code (with the public batch_loss)
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 nice -n 10 python benchmarks/train_step_speed.py \\
        --store c2np_out/fit/store_paper.h5 --previous-src /tmp/prev/src

Without ``--previous-src`` only this code is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("cdvae", "diffcsp", "flowmm", "mattergen", "adit", "adit-dit")


def worker(args: argparse.Namespace) -> int:
    """One measurement in this process: check steps (losses, weights), then timed steps."""
    sys.path.insert(0, str(Path(args.src).resolve()))
    import torch

    torch.set_num_threads(int(args.threads))
    import c2np
    from c2np.models.config import ModelConfig
    from c2np.models.data import training_rows
    from c2np.models.optim import build_optimizer, optimizer_step, total_steps
    from c2np.models.training import batch_loss, build_model, generator
    from c2np.store import DatasetStore

    name = args.family.split("-")[0]
    meta = json.loads((Path(args.pretrained) / f"{name}-forward" / "config.json").read_text())
    cfg = ModelConfig.from_dict(meta["config"])
    store = DatasetStore.open(args.store)
    data = training_rows(store, max_radius_angstrom=cfg.max_train_radius_angstrom)
    torch.manual_seed(args.seed)
    model = build_model(name, "forward", cfg)
    if args.family == "adit-dit":  # start at ADiT's stage boundary: every step trains the latent DiT
        model.steps_done.fill_(round(cfg.ae_fraction * total_steps(cfg)))
    opt, sched, ema = build_optimizer(model, cfg)
    g = generator(args.seed, model)
    rng = np.random.default_rng(args.seed)
    model.train()

    def step() -> float:
        rows = rng.choice(data.train, size=cfg.batch_size, replace=len(data.train) < cfg.batch_size)
        loss, _ = batch_loss(model, store, rows, g)
        optimizer_step(model, loss, opt, sched, ema, grad_clip=cfg.grad_clip)
        return float(loss.item())

    losses = [step() for _ in range(int(args.check_steps))]
    if args.weights:
        from safetensors.torch import save_file

        save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, args.weights)
    t0, w0 = time.process_time(), time.perf_counter()
    for _ in range(int(args.steps)):
        step()
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    n = max(1, int(args.steps))
    Path(args.out).write_text(json.dumps({"c2np": str(Path(c2np.__file__).resolve()), "losses": losses,
                                          "cpu_s_per_step": cpu / n, "wall_s_per_step": wall / n}))
    return 0


def _run_worker(src: Path, family: str, a: argparse.Namespace, check_steps: int, out: Path,
                weights: Path | None) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--src", str(src), "--family", family,
           "--store", a.store, "--pretrained", a.pretrained, "--steps", str(a.steps), "--check-steps",
           str(check_steps), "--seed", str(a.seed), "--threads", str(a.threads), "--out", str(out)]
    if weights is not None:
        cmd += ["--weights", str(weights)]
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "MKL_NUM_THREADS": str(a.threads)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {family} ({src}) failed:\n{proc.stderr[-2000:]}")
    res = json.loads(out.read_text())
    if not res["c2np"].startswith(str(src.resolve())):
        raise RuntimeError(f"worker imported {res['c2np']}, not the code under {src}")
    return dict(res)


def _max_weight_diff(a: Path, b: Path) -> float:
    import torch
    from safetensors.torch import load_file

    wa, wb = load_file(str(a)), load_file(str(b))
    if set(wa) != set(wb):
        return float("inf")
    return max((float((wa[k].double() - wb[k].double()).abs().max()) if wa[k].numel() else 0.0) for k in wa
               if torch.is_floating_point(wa[k])) if wa else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default="c2np_out/fit/store_paper.h5")
    ap.add_argument("--pretrained", default=str(ROOT / "pretrained"), help="folder of <family>-forward/config.json")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--previous-src", default=None, help="src folder of the previous code (git archive REV src)")
    ap.add_argument("--steps", type=int, default=12, help="timed steps per measurement")
    ap.add_argument("--check-steps", type=int, default=30, help="steps whose losses and weights are compared")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="JSON of all measurements")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--src", default=str(ROOT / "src"), help=argparse.SUPPRESS)
    ap.add_argument("--family", default="cdvae", help=argparse.SUPPRESS)
    ap.add_argument("--weights", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    families = [f.strip() for f in a.families.split(",") if f.strip()]
    bad = [f for f in families if f not in FAMILIES]
    problem = (f"--families: unknown {bad}; choose from {list(FAMILIES)}" if bad else
               f"--store {a.store}: no such file" if not Path(a.store).is_file() else
               f"--previous-src {a.previous_src}: no c2np package there"
               if a.previous_src and not (Path(a.previous_src) / "c2np" / "__init__.py").is_file() else None)
    missing = [f for f in families if not (Path(a.pretrained) / f"{f.split('-')[0]}-forward" / "config.json").is_file()]
    if problem is None and missing:
        problem = f"--pretrained {a.pretrained}: no <family>-forward/config.json for {missing}"
    if problem is not None or a.repeats < 1 or a.steps < 1:
        print(f"train_step_speed: {problem or '--repeats and --steps must be >= 1'}", file=sys.stderr)
        return 2
    versions = {"this": ROOT / "src"}
    if a.previous_src:
        versions = {"previous": Path(a.previous_src), **versions}
    cpu: dict[tuple[str, str], list[float]] = {}
    check: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeats):
            for fam in families:
                order = list(versions) if r % 2 == 0 else list(versions)[::-1]
                for v in order:
                    first = r == 0
                    wpath = Path(tmp) / f"{fam}-{v}.safetensors" if first else None
                    res = _run_worker(versions[v], fam, a, a.check_steps if first else 2,
                                      Path(tmp) / f"{fam}-{v}-{r}.json", wpath)
                    cpu.setdefault((fam, v), []).append(res["cpu_s_per_step"])
                    if first:
                        check.setdefault(fam, {})[v] = res["losses"]
                    print(f"repeat {r + 1}/{a.repeats} {fam:9s} {v:8s} {res['cpu_s_per_step']:.3f} CPU s/step",
                          flush=True)
            if r == 0 and "previous" in versions:
                for fam in families:
                    la, lb = np.array(check[fam]["previous"]), np.array(check[fam]["this"])
                    check[fam]["max_loss_diff"] = float(np.abs(la - lb).max()) if len(la) else 0.0
                    check[fam]["max_weight_diff"] = _max_weight_diff(Path(tmp) / f"{fam}-previous.safetensors",
                                                                     Path(tmp) / f"{fam}-this.safetensors")
    rows = []
    head = "| family | this CPU s/step |"
    if "previous" in versions:
        head = (f"| family | previous CPU s/step | this CPU s/step | ratio | max abs loss diff ({a.check_steps} steps) "
                "| max abs weight diff |")
    print(f"\nmedian of {a.repeats} repeats x {a.steps} timed steps, one thread\n")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for fam in families:
        this = float(np.median(cpu[(fam, "this")]))
        row: dict[str, Any] = {"family": fam, "this_cpu_s_per_step": this, "this_all": cpu[(fam, "this")]}
        if "previous" in versions:
            prev = float(np.median(cpu[(fam, "previous")]))
            row.update(previous_cpu_s_per_step=prev, previous_all=cpu[(fam, "previous")], ratio=prev / this,
                       max_loss_diff=check[fam]["max_loss_diff"], max_weight_diff=check[fam]["max_weight_diff"])
            print(f"| {fam} | {prev:.3f} | {this:.3f} | {prev / this:.2f}x | {row['max_loss_diff']:.3g} "
                  f"| {row['max_weight_diff']:.3g} |")
        else:
            print(f"| {fam} | {this:.3f} |")
        rows.append(row)
    if a.out:
        Path(a.out).write_text(json.dumps({"args": vars(a), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
