"""Speed of the learned models against an earlier version of the code, side by side.

Every measurement runs the same public calls in child processes, once with this checkout's
``src`` and once with the ``src`` of a baseline commit (a detached ``git worktree``, default
the commit before batched task-2 sampling), so both columns come from one run on one machine:

* ``task2``: each shipped task-2 generator (``pretrained/*-inverse``, the pool) on the same
  held-out development particles (protocol ``strict``, one rotation per (material, R), a
  seeded pick; chunks of ``c2np.models.inverse.predict.CHUNK`` particles with their seeds):
  CPU seconds per particle (median over chunks, each chunk's CPU time / its particles) and
  the joint accuracy of the answers scored by the evaluation harness (95 % bootstrap
  interval), with the paired bootstrap interval of new minus old.
* ``forward``: a shipped task-1 run (default MatterGen) sampled on the held-out development
  rows: atoms per CPU second and atom F1 at 0.5 Å scored by the harness.
* ``heldout``: every model of ``--models`` (this checkout) on all held-out eval rows at
  ``--radii`` (one rotation per (material, R)), ``--cores`` one-thread processes at a time: the
  wall time of the whole job and each model's joint accuracy.
* ``env``: this checkout's ``task2`` on the first model with the default environment (the
  thread policy of :mod:`c2np.threads`, as the command line applies it) against
  ``OMP_NUM_THREADS=1`` (wall seconds; about 1 on an otherwise idle machine).

``--threads 1`` (default) measures ``task2`` and ``forward`` on one thread per child, the CPU
seconds of one core (a machine shared with other work inflates the CPU time of spinning
thread pools).

Run (a strict store from ``c2np build --protocol strict -o strict.h5``)::

    python benchmarks/speed.py --store strict.h5 --particles 8 --what task2,forward,env

``--projection`` also prints the projected wall time of scoring every shipped task-2 model
on the held-out eval rows at the radii of ``--radii`` on ``--cores`` cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: the last commit whose task-2 generators sampled every template and draw in its own batch
BASELINE_REF = "ed6268b"
TASK2_MODELS = ("adit-inverse", "cdvae-inverse", "diffcsp-inverse", "flowmm-inverse", "mattergen-inverse",
                "diffcsp-flowmm-pool-inverse")


# --- child side: runs under either tree's src -------------------------------------------
def _pick(store: Any, split: str, n: int, seed: int, *, forward: bool) -> list[tuple[str, Any]]:
    from c2np.models.training import query_items

    items = query_items(store, split, subset="eval", per_group=1, forward=forward)
    keep = np.sort(np.random.default_rng(seed).choice(len(items), min(n, len(items)), replace=False))
    return [items[int(k)] for k in keep]


def _at_radii(store: Any, split: str, radii: list[float]) -> list[tuple[str, Any]]:
    """The task-2 eval rows of ``split`` (one rotation per (material, R)) at the given radii."""
    from c2np.models.training import query_items
    from c2np.tasks import opaque_sample_id, select_rows

    rec, fp = store.recipes, str(store.fingerprint)
    want = {opaque_sample_id(fp, rec.sample_id(int(r))) for r in select_rows(rec, split, "eval", per_group=1)
            if float(rec.radius_angstrom[int(r)]) in set(radii)}
    return [it for it in query_items(store, split, subset="eval", per_group=1, forward=False) if it[0] in want]


def _child_task2(job: dict[str, Any]) -> dict[str, Any]:
    import time

    from c2np.models.inverse.pool import load_inverse_generator
    from c2np.models.inverse.predict import CHUNK
    from c2np.models.training import batch_seed
    from c2np.store import DatasetStore

    store = DatasetStore.open(job["store"])
    if job.get("radii"):
        items = _at_radii(store, job["split"], job["radii"])
    else:
        items = _pick(store, job["split"], job["particles"], job["seed"], forward=False)
    gen = load_inverse_generator(job["model"])
    per_particle, answers = [], {}
    wall = time.perf_counter()
    for b in range(0, len(items), CHUNK):
        part = items[b:b + CHUNK]
        t0 = time.process_time()
        got = gen.predict_particles([p for _, p in part], seed=batch_seed(0, b // CHUNK))
        per_particle.append((time.process_time() - t0) / len(part))
        for (sid, _), ans in zip(part, got):
            answers[sid] = None if ans is None else [float(x) for x in ans.as_tuple()]
    return {"cpu_s_per_particle": per_particle, "wall_s": time.perf_counter() - wall, "answers": answers,
            "atoms": [int(p.n_atoms) for _, p in items]}


def _child_forward(job: dict[str, Any]) -> dict[str, Any]:
    import time

    import torch

    from c2np.models.training import batch_seed, load_run
    from c2np.store import DatasetStore

    store = DatasetStore.open(job["store"])
    items = _pick(store, job["split"], job["particles"], job["seed"], forward=True)
    model, _ = load_run(job["model"], checkpoint="best", device="cpu")
    size = int(model.cfg.batch_size)
    out: dict[str, Any] = {}
    t0, wall = time.process_time(), time.perf_counter()
    with torch.no_grad():
        for b in range(0, len(items), size):
            chunk = items[b:b + size]
            g = torch.Generator().manual_seed(batch_seed(0, b // size))
            for (sid, _), p in zip(chunk, model.sample([c for _, c in chunk], g)):
                out[sid] = {"numbers": np.asarray(p.numbers).tolist(),
                            "positions": np.asarray(p.positions_angstrom).tolist()}
    cpu = time.process_time() - t0
    atoms = sum(len(v["numbers"]) for v in out.values())
    return {"cpu_s": cpu, "wall_s": time.perf_counter() - wall, "atoms": atoms, "particles": out}


def child_main(job_json: str) -> None:
    job = json.loads(job_json)
    from c2np.threads import use_threads

    use_threads()       # the thread policy, as the command line applies it (C2NP_THREADS / OMP_NUM_THREADS win)
    res = _child_task2(job) if job["what"] == "task2" else _child_forward(job)
    print("RESULT " + json.dumps(res))


# --- parent side -------------------------------------------------------------------------
def baseline_src(ref: str, given: str | None) -> Path:
    """The ``src`` folder of the baseline: ``given``, or a detached worktree of ``ref``."""
    if given:
        return Path(given)
    where = Path(tempfile.gettempdir()) / f"c2np-speed-baseline-{ref}"
    if not (where / "src").is_dir():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), ref], check=True,
                       capture_output=True)
    return where / "src"


def run_child(src: Path, job: dict[str, Any], *, env_extra: dict[str, str] | None = None,
              clean_env: bool = False, threads: int = 0) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items()
           if not (clean_env and k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "C2NP_THREADS"))}
    env.update(env_extra or {})
    if threads > 0:
        env["C2NP_THREADS"] = str(threads)
    env["PYTHONPATH"] = str(src)
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)], env=env, capture_output=True,
                          text=True, cwd=str(ROOT))
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"child failed ({src}): {proc.stderr.strip().splitlines()[-1:]}")
    return dict(json.loads(line[len("RESULT "):]))


def score_task2(store_path: str, split: str, answers: dict[str, Any]) -> Any:
    """Harness results of task-2 answers (opaque id -> 7 values or None) on their rows."""
    from c2np.evaluation.harness import score_inverse
    from c2np.store import DatasetStore
    from c2np.tasks import inverse_target, opaque_sample_id, select_rows

    store = DatasetStore.open(store_path)
    rec = store.recipes
    fp = str(store.fingerprint)
    index = {opaque_sample_id(fp, rec.sample_id(int(r))): int(r)
             for r in select_rows(rec, split, "eval", per_group=1)}
    rows = np.array(sorted(index[s] for s in answers))
    preds = {s: (None if v is None else {**dict(zip(("a", "b", "c", "alpha", "beta", "gamma"), v[:6])),
                                         "spacegroup": int(v[6])}) for s, v in answers.items()}
    preds = {s: v for s, v in preds.items() if v is not None}
    mats = {rec.materials[int(m)] for m in rec.material_index[rows]}
    return score_inverse(store, rows, preds, id_index=index, targets={m: inverse_target(store.cells[m]) for m in mats},
                         split=split, subset="speed-benchmark", subset_definition={"rows": "seeded pick"},
                         model="generator", n_resamples=1000)


def score_forward_f1(store_path: str, split: str, particles: dict[str, Any]) -> Any:
    from c2np.evaluation.harness import score_forward
    from c2np.particle import Particle
    from c2np.store import DatasetStore

    store = DatasetStore.open(store_path)
    rec = store.recipes
    index = {sid: r for r, sid in enumerate(rec.sample_ids())}
    rows = np.array(sorted(index[s] for s in particles))
    preds = {s: Particle(numbers=np.asarray(v["numbers"], dtype=np.int64),
                         positions_angstrom=np.asarray(v["positions"], dtype=np.float64).reshape(-1, 3))
             for s, v in particles.items()}
    return score_forward(store, rows, preds, id_index=index, split=split, subset="speed-benchmark",
                         subset_definition={"rows": "seeded pick"}, model="forward", n_resamples=1000)


def _metric(res: Any, name: str) -> str:
    r = res.overall[name]
    return f"{r['mean']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]"


def paired_difference(new: Any, old: Any, name: str, *, seed: int = 0, n: int = 2000) -> str:
    """Paired bootstrap 95 % interval of mean(new - old) of a per-sample metric."""
    a, b = new.data["samples"], old.data["samples"]
    va = dict(zip(a["sample_id"], a[name]))
    d = np.array([va[s] - x for s, x in zip(b["sample_id"], b[name])], dtype=np.float64)
    d = np.nan_to_num(d)
    rng = np.random.default_rng(seed)
    boot = d[rng.integers(0, len(d), (n, len(d)))].mean(1)
    return f"{d.mean():+.3f} [{np.quantile(boot, 0.025):+.3f}, {np.quantile(boot, 0.975):+.3f}]"


def forward_section(args: argparse.Namespace, name: str, new_src: Path, old_src: Path | None) -> None:
    """Print atoms per CPU second and atom F1@0.5 of forward run ``name`` under both trees, with
    the paired difference of F1 (the baseline reads the folder as its own commit shipped it:
    the same weights, its own sampler settings)."""
    job = {"what": "forward", "store": args.store, "split": args.split, "particles": args.forward_rows,
           "seed": args.seed, "model": str(ROOT / "pretrained" / name)}
    print(f"\ntask 1: {name}, {args.forward_rows} {args.split} rows")
    print(f"{'code':10s} {'atoms':>7s} {'CPU s':>8s} {'atoms/CPU s':>12s} {'f1@0.5':22s}")
    cols = [("new", new_src)] + ([("old", old_src)] if old_src is not None else [])
    rates, results = {}, {}
    for label, src in cols:
        own = src.parent / "pretrained" / name
        r = run_child(src, {**job, "model": str(own)} if own.is_dir() else job, threads=args.threads)
        rates[label] = r["atoms"] / max(r["cpu_s"], 1e-9)
        results[label] = score_forward_f1(args.store, args.split, r["particles"])
        print(f"{label:10s} {r['atoms']:7d} {r['cpu_s']:8.1f} {rates[label]:12.1f} "
              f"{_metric(results[label], 'f1@0.5'):22s}")
    if "old" in rates:
        print(f"ratio new/old atoms per CPU s: {rates['new'] / rates['old']:.2f}x; f1@0.5 new - old (paired): "
              f"{paired_difference(results['new'], results['old'], 'f1@0.5')}")


def heldout_section(args: argparse.Namespace, src: Path) -> None:
    """Every model of ``--models`` on all held-out eval rows at ``--radii`` (one rotation per
    (material, R)), ``--cores`` one-thread children at a time: the wall time of the whole job,
    then each model's joint accuracy by the harness (the models are fixed before this runs)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    radii = [float(r) for r in args.radii.split(",")]
    names = args.models.split(",")
    jobs = {name: {"what": "task2", "store": args.store, "split": "heldout", "radii": radii, "seed": args.seed,
                   "particles": 0, "model": str(ROOT / "pretrained" / name)} for name in names}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.cores)) as pool:
        done = dict(zip(names, pool.map(lambda n: run_child(src, jobs[n], threads=1), names)))
    wall = time.perf_counter() - t0
    n_rows = len(next(iter(done.values()))["answers"]) if done else 0
    print(f"\nheld-out eval rows at R = {args.radii} Å ({n_rows} per model, one rotation per (material, R)), "
          f"{len(names)} models, {args.cores} one-thread processes: {wall:.0f} s wall = {wall / 60:.1f} min")
    print(f"{'model':32s} {'CPU s/particle (median)':>24s}  joint accuracy (harness)")
    for name in names:
        res = score_task2(args.store, "heldout", done[name]["answers"])
        print(f"{name:32s} {statistics.median(done[name]['cpu_s_per_particle']):24.2f}  "
              f"{_metric(res, 'joint_accuracy_paper')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", help="protocol strict store (.h5)")
    ap.add_argument("--split", default="heldout-dev")
    ap.add_argument("--particles", type=int, default=8, help="task-2 particles per model (a seeded pick)")
    ap.add_argument("--forward-rows", type=int, default=16, help="task-1 rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", default=",".join(TASK2_MODELS), help="task-2 folders under pretrained/")
    ap.add_argument("--forward-model", default="mattergen-forward",
                    help="task-1 folders under pretrained/, comma-separated")
    ap.add_argument("--what", default="task2,forward,env")
    ap.add_argument("--baseline-ref", default=BASELINE_REF)
    ap.add_argument("--baseline-src", default=None, help="src folder of the baseline instead of a worktree")
    ap.add_argument("--no-baseline", action="store_true", help="measure this checkout only")
    ap.add_argument("--projection", action="store_true")
    ap.add_argument("--radii", default="6,10,20,30")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1,
                    help="threads per child for task2/forward (CPU seconds on one core; 0: the thread policy)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child_main(args.child)
        return
    if not args.store:
        ap.error("--store is required")
    what = set(args.what.split(","))
    new_src = ROOT / "src"
    old_src = None if args.no_baseline else baseline_src(args.baseline_ref, args.baseline_src)
    medians: dict[str, float] = {}
    if "task2" in what:
        print(f"task 2: {args.particles} {args.split} particles per model (one rotation per (material, R)); "
              f"CPU s per particle = median over chunks; joint accuracy (paper tolerance) by the harness")
        print(f"{'model':32s} {'old s/p':>8s} {'new s/p':>8s} {'ratio':>6s}  {'old joint':22s} "
              f"{'new joint':22s} new - old (paired)")
        for name in args.models.split(","):
            job = {"what": "task2", "store": args.store, "split": args.split, "particles": args.particles,
                   "seed": args.seed, "model": str(ROOT / "pretrained" / name)}
            new = run_child(new_src, job, threads=args.threads)
            res_new = score_task2(args.store, args.split, new["answers"])
            medians[name] = statistics.median(new["cpu_s_per_particle"])
            if old_src is None:
                print(f"{name:32s} {'-':>8s} {medians[name]:8.2f} {'-':>6s}  {'-':22s} "
                      f"{_metric(res_new, 'joint_accuracy_paper'):22s}")
                continue
            # the baseline reads the folder as its own commit shipped it (the same weights; folder
            # layouts such as pool.json's change between versions)
            own = old_src.parent / "pretrained" / name
            old = run_child(old_src, {**job, "model": str(own)} if own.is_dir() else job, threads=args.threads)
            res_old = score_task2(args.store, args.split, old["answers"])
            m_old = statistics.median(old["cpu_s_per_particle"])
            same = sum(old["answers"][s] == new["answers"][s] for s in new["answers"])
            print(f"{name:32s} {m_old:8.2f} {medians[name]:8.2f} {m_old / medians[name]:6.1f}x "
                  f"{_metric(res_old, 'joint_accuracy_paper'):22s} {_metric(res_new, 'joint_accuracy_paper'):22s} "
                  f"{paired_difference(res_new, res_old, 'joint_accuracy_paper')}  ({same}/{len(new['answers'])} "
                  "answers identical)")
    if "forward" in what:
        for fmodel in args.forward_model.split(","):
            forward_section(args, fmodel, new_src, old_src)
    if "env" in what:
        name = args.models.split(",")[0]
        job = {"what": "task2", "store": args.store, "split": args.split, "particles": args.particles,
               "seed": args.seed, "model": str(ROOT / "pretrained" / name)}
        default = run_child(new_src, job, clean_env=True)
        tuned = run_child(new_src, job, clean_env=True, env_extra={"OMP_NUM_THREADS": "1"})
        print(f"\nenvironment ({name}, this checkout): default {default['wall_s']:.1f} s wall, "
              f"OMP_NUM_THREADS=1 {tuned['wall_s']:.1f} s wall, ratio {default['wall_s'] / tuned['wall_s']:.2f}")
    if "heldout" in what:
        heldout_section(args, new_src)
    if args.projection and medians:
        from c2np.store import DatasetStore
        from c2np.tasks import select_rows

        rec = DatasetStore.open(args.store).recipes
        radii = {float(r) for r in args.radii.split(",")}
        for per_group in (1, 8):
            rows = select_rows(rec, "heldout", "eval", per_group=per_group)
            n = int(sum(float(rec.radius_angstrom[int(r)]) in radii for r in rows))
            cpu = n * sum(medians.values())
            print(f"projection: {n} held-out eval rows at R = {args.radii} Å ({per_group} rotation(s)), every "
                  f"measured model: {cpu:.0f} CPU s = {cpu / args.cores / 60:.1f} min on {args.cores} cores")


if __name__ == "__main__":
    main()
