"""Train a task-2 crystal generator (c2np.models.crystal_gen) on a store's training materials.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/train_crystal_gen.py out/strict.h5 \
        --process diffcsp --out pretrained/diffcsp-inverse --steps 3000

Training pairs: ForwardTask(split="train").training_examples(rotations_per_group=1) — the
training cells (never a held-out material under protocol strict) and their particles, each
described clean and re-carved about a random centre (seeded) with Gaussian noise
(sigma uniform in [0, 0.06] Å).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from c2np.carving import carve
from c2np.models.crystal_gen import CellExample, CrystalGenerator, GenConfig, cell_example, save_generator
from c2np.particle import Particle
from c2np.particle_descriptor import ParticleDescriptor, describe
from c2np.tasks import ForwardTask


def examples(store: str, seed: int) -> list:
    task = ForwardTask.open(store, split="train", subset="full")
    rng = np.random.default_rng(seed)
    out = []
    for q, part in task.training_examples(rotations_per_group=1):
        rc = carve(q.cell, q.radius_angstrom, centre_frac=rng.random(3), quaternion=q.quaternion).particle
        out.append(cell_example(describe(part), q.cell))
        noisy = rc.positions_angstrom + rng.normal(scale=rng.uniform(0, 0.06), size=rc.positions_angstrom.shape)
        out.append(cell_example(describe(Particle(rc.numbers, noisy)), q.cell))
    return out


def save_examples(ex: list, path: Path) -> None:
    """The training pairs as one npz (no pickle): descriptor fields and cells, concatenated."""
    d = [e.descriptor for e in ex]
    n_atoms = np.array([len(e.slots) for e in ex])
    n_species = np.array([len(x.numbers) for x in d])
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, scale=np.array([x.scale_angstrom for x in d]), hist=np.stack([x.histograms for x in d]),
             slot_numbers=np.stack([x.slot_numbers for x in d]), slot_fractions=np.stack([x.slot_fractions for x in d]),
             n_species=n_species, numbers=np.concatenate([x.numbers for x in d]),
             slot_of=np.concatenate([x.slot_of for x in d]), lattice=np.stack([e.lattice_angstrom for e in ex]),
             n_atoms=n_atoms, frac=np.concatenate([e.frac for e in ex]), slots=np.concatenate([e.slots for e in ex]))


def load_examples(path: Path) -> list:
    """Inverse of :func:`save_examples`."""
    z = np.load(path, allow_pickle=False)
    out = []
    sp = np.r_[0, np.cumsum(z["n_species"])]
    at = np.r_[0, np.cumsum(z["n_atoms"])]
    for i in range(len(z["scale"])):
        d = ParticleDescriptor(float(z["scale"][i]), z["hist"][i], z["slot_numbers"][i], z["slot_fractions"][i],
                               z["numbers"][sp[i]:sp[i + 1]], z["slot_of"][sp[i]:sp[i + 1]])
        out.append(CellExample(d, z["lattice"][i], z["frac"][at[i]:at[i + 1]], z["slots"][at[i]:at[i + 1]]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("--process", default="diffcsp")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--sample-steps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default="out/gen_examples.npz", help="training pairs cache (npz)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    cache = Path(args.cache)
    if cache.is_file():
        ex = load_examples(cache)
    else:
        ex = examples(args.store, args.seed)
        save_examples(ex, cache)
    print(f"{len(ex)} training pairs in {time.time() - t0:.0f} s", flush=True)
    cfg = GenConfig(process=args.process, train_steps=args.steps, hidden=args.hidden,
                    steps=args.sample_steps, seed=args.seed, batch=args.batch, lr=args.lr)
    rows: list[dict] = []

    def log(r: dict) -> None:
        r = {**r, "seconds": round(time.time() - t0, 1)}
        rows.append(r)
        print(json.dumps(r), flush=True)

    model = CrystalGenerator.fit(ex, cfg, log=log)
    save_generator(model, args.out, rows)
    print(f"saved {args.out} ({time.time() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
