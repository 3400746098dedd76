"""MatterGen sampler throughput (atoms/s, particles/s per CPU second of one thread) on a few
fixed queries, optionally profiled, optionally compared with an earlier run of this script.

The queries are the harness's first eval rotation of ``--materials`` at ``--radii`` (the rows
``c2np predict --per-group 1`` samples). Each query is sampled as ``c2np predict`` samples
it (batch of the run's batch size, noise from ``batch_seed(seed, b)``), so a run of this
script on two versions of the sampler samples the same particles when the sampler's results
are unchanged: the JSON records a SHA-256 of every particle's types and positions, and
``--baseline`` prints whether they are identical beside the speed ratio.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/mattergen_sampler_speed.py \\
        --run pretrained/mattergen-forward --store c2np_out/fit/store_paper.h5 \\
        --out c2np_out/mg_speed_before.json
    ... (change the sampler) ...
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/mattergen_sampler_speed.py \\
        --run pretrained/mattergen-forward --store c2np_out/fit/store_paper.h5 \\
        --out c2np_out/mg_speed_after.json --baseline c2np_out/mg_speed_before.json

``--batch B`` samples B queries per sampler call (as ``c2np predict`` with the run's batch
size; a batch's CPU time is shared among its particles by atoms, so the per-query rates are
the batch's). ``--profile N``: cProfile of the whole sampling, the N functions of most cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def particle_digest(numbers: np.ndarray, positions: np.ndarray) -> str:
    """SHA-256 of a particle's atomic numbers (int64) and positions (float64, Å)."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(numbers, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(positions, dtype=np.float64).tobytes())
    return h.hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default="pretrained/mattergen-forward")
    ap.add_argument("--store", required=True)
    ap.add_argument("--materials", default="KMgH3,CsCaH3")
    ap.add_argument("--radii", default="6,10")
    ap.add_argument("--steps", type=int, default=None, help="sampler steps (default: the run's config)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1, help="queries per sampler call (c2np predict: the run's 4)")
    ap.add_argument("--profile", type=int, default=0, help="print the top N cProfile entries")
    ap.add_argument("--out", default=None, help="JSON of the measurement")
    ap.add_argument("--baseline", default=None, help="JSON of an earlier run: print ratios and identity")
    args = ap.parse_args()

    import torch

    from c2np.models.data import condition_from_query
    from c2np.models.training import batch_seed, generator, load_run
    from c2np.store import DatasetStore
    from c2np.tasks import ForwardTask

    torch.set_num_threads(1)
    model, meta = load_run(args.run)
    store = DatasetStore.open(args.store)
    want_m = args.materials.split(",")
    want_r = {float(r) for r in args.radii.split(",")}
    items = []
    for split in ("id", "ood", "val", "train"):
        if not np.any(store.recipes.mask(split)):
            continue
        for q in ForwardTask(store, split, "eval", per_group=1).queries():
            mat = q.sample_id.split("/")[0]
            if mat in want_m and float(q.radius_angstrom) in want_r:
                items.append((q.sample_id, condition_from_query(q)))
    items.sort(key=lambda it: (it[1].radius_angstrom, it[0]))
    if not items:
        print("no query matches --materials / --radii", file=sys.stderr)
        return 2
    rows = []
    prof = cProfile.Profile() if args.profile else None
    with torch.no_grad():
        for b in range(-(-len(items) // args.batch)):
            chunk = items[b * args.batch:(b + 1) * args.batch]
            g = generator(batch_seed(args.seed, b), model)
            c0, t0 = time.process_time(), time.perf_counter()
            if prof is not None:
                prof.enable()
            parts = model.sample([cond for _, cond in chunk], g, steps=args.steps)
            if prof is not None:
                prof.disable()
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            n_chunk = sum(len(p.numbers) for p in parts)
            for (sid, cond), p in zip(chunk, parts, strict=True):
                share = len(p.numbers) / n_chunk  # a batch's time, split by atoms
                rows.append({"sample_id": sid, "radius_angstrom": cond.radius_angstrom, "n_atoms": len(p.numbers),
                             "cpu_s": cpu * share, "wall_s": wall * share,
                             "atoms_per_cpu_s": n_chunk / cpu, "particles_per_cpu_s": len(chunk) / cpu,
                             "digest": particle_digest(p.numbers, p.positions_angstrom)})
            print(f"batch {b} ({', '.join(sid for sid, _ in chunk)}): {n_chunk} atoms, {cpu:.1f} CPU s "
                  f"({wall:.1f} s wall)", flush=True)
    res = {"run": args.run, "checkpoint": meta["checkpoint"], "steps": args.steps, "seed": args.seed,
           "batch": args.batch, "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    base = {r["sample_id"]: r for r in json.loads(Path(args.baseline).read_text())["rows"]} if args.baseline else {}
    head = "| query | atoms | CPU s | atoms/s | particles/s |"
    sep = "|---|---|---|---|---|"
    if base:
        head += " baseline atoms/s | speed-up | identical |"
        sep += "---|---|---|"
    print(head)
    print(sep)
    for r in rows:
        line = (f"| {r['sample_id']} | {r['n_atoms']} | {r['cpu_s']:.1f} | {r['atoms_per_cpu_s']:.1f} | "
                f"{r['particles_per_cpu_s']:.3f} |")
        if base:
            o = base.get(r["sample_id"])
            line += (f" {o['atoms_per_cpu_s']:.1f} | {r['atoms_per_cpu_s'] / o['atoms_per_cpu_s']:.2f}x | "
                     f"{'yes' if o['digest'] == r['digest'] else 'NO'} |" if o else " - | - | - |")
        print(line)
    n, cpu = sum(r["n_atoms"] for r in rows), sum(r["cpu_s"] for r in rows)
    tot = f"| all | {n} | {cpu:.1f} | {n / cpu:.1f} | {len(rows) / cpu:.3f} |"
    if base and all(r["sample_id"] in base for r in rows):
        bcpu = sum(base[r["sample_id"]]["cpu_s"] for r in rows)
        same = all(base[r["sample_id"]]["digest"] == r["digest"] for r in rows)
        tot += f" {n / bcpu:.1f} | {bcpu / cpu:.2f}x | {'yes' if same else 'NO'} |"
    print(tot)
    if prof is not None:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(args.profile)
        print(s.getvalue())
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(args.profile)
        print(s.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
