"""Train a task-2 crystal generator (c2np.models.crystal_gen) on a store's training materials.

    OMP_NUM_THREADS=1 nice -n 10 python reproduce/inverse-generators/train.py out/strict.h5 \
        --process diffcsp --out pretrained/diffcsp-inverse --steps 3000

Training pairs: ForwardTask(split="train").training_examples(rotations_per_group=1) — the
training cells (never a held-out material under protocol strict) and their particles, each
described (1) clean, (2) re-carved about a random centre (seeded) with Gaussian noise of a
sigma uniform in [0, 0.06] Å and, with ``--noisy-copies K``, (3) K more copies of the
stored particle with noise of a sigma uniform in [0.01, 0.06] Å. Only training
materials' particles are augmented; no held-out material enters (asserted).

``--time-budget S`` stops training after S wall-clock seconds (the learning-rate schedule
follows the larger of the step and time fractions); ``--checkpoint-every N`` saves the
model every N steps to ``--out`` (the log says where it stopped).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.examples import CellExample, training_pairs
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.io import load_generator, save_generator
from c2np.models.inverse.training import fit_generator
from c2np.particle_descriptor import ParticleDescriptor
from c2np.tasks import ForwardTask


def examples(store: str, seed: int, noisy_copies: int = 0) -> list:
    """The training pairs (c2np.models.inverse.examples.training_pairs) of a store's train split."""
    return training_pairs(ForwardTask.open(store, split="train", subset="full"), seed=seed,
                          noisy_copies=noisy_copies)


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
             n_atoms=n_atoms, frac=np.concatenate([e.frac for e in ex]), slots=np.concatenate([e.slots for e in ex]),
             spacegroup=np.array([e.spacegroup for e in ex]))


def load_examples(path: Path) -> list:
    """Inverse of :func:`save_examples`."""
    with np.load(path, allow_pickle=False) as npz:     # read each array once (an NpzFile re-reads per access)
        z = {k: npz[k] for k in npz.files}
    out = []
    sp = np.r_[0, np.cumsum(z["n_species"])]
    at = np.r_[0, np.cumsum(z["n_atoms"])]
    sg = z.get("spacegroup", np.zeros(len(z["scale"]), dtype=np.int64))    # older caches: not known
    for i in range(len(z["scale"])):
        d = ParticleDescriptor(float(z["scale"][i]), z["hist"][i].copy(), z["slot_numbers"][i].copy(),
                               z["slot_fractions"][i].copy(), z["numbers"][sp[i]:sp[i + 1]].copy(),
                               z["slot_of"][sp[i]:sp[i + 1]].copy())
        out.append(CellExample(d, z["lattice"][i].copy(), z["frac"][at[i]:at[i + 1]].copy(),
                               z["slots"][at[i]:at[i + 1]].copy(), int(sg[i])))
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
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--lattice-param", default="eps", choices=["eps", "x0"])
    ap.add_argument("--lattice-weight", type=float, default=1.0)
    ap.add_argument("--sampler", default="sde", choices=["sde", "ode", "pc"])
    ap.add_argument("--n-samples", type=int, default=1)
    ap.add_argument("--noisy-copies", type=int, default=0)
    ap.add_argument("--pair-readout", action="store_true", help="periodic pair readout of the frac output")
    ap.add_argument("--balance-classes", action="store_true", help="every composition class equally often")
    ap.add_argument("--mid-t-fraction", type=float, default=0.0,
                    help="fraction of each batch with diffusion time in (0.5 T, 0.9 T]")
    ap.add_argument("--spacegroup-condition", action="store_true",
                    help="tell the denoiser the cell's space group (DiffCSP++-style; sampling: the template's)")
    ap.add_argument("--spacegroup-drop-fraction", type=float, default=0.1,
                    help="with --spacegroup-condition: share of training rows given no group")
    ap.add_argument("--init", default=None, help="start from this generator folder's weights (same config)")
    ap.add_argument("--time-budget", type=float, default=None, help="wall-clock seconds")
    ap.add_argument("--checkpoint-every", type=int, default=1000)
    ap.add_argument("--type-known-fraction", type=float, default=0.5,
                    help="mattergen: share of training rows whose species slots are given, not diffused")
    ap.add_argument("--ld-steps-per-level", type=int, default=1,
                    help="cdvae: annealed-Langevin steps per noise level (--sample-steps levels)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    cache = Path(args.cache)
    if cache.is_file():
        ex = load_examples(cache)
    else:
        ex = examples(args.store, args.seed, args.noisy_copies)
        save_examples(ex, cache)
    print(f"{len(ex)} training pairs in {time.time() - t0:.0f} s", flush=True)
    sgs: tuple[int, ...] = ()
    if args.spacegroup_condition:
        sgs = tuple(sorted({e.spacegroup for e in ex} - {0}))
        if not sgs:
            print(f"{cache}: its training pairs carry no space groups (an older cache); "
                  "delete it or name another --cache", file=sys.stderr)
            return 2
        print(f"space-group condition: {list(sgs)}", flush=True)
    cfg = GenConfig(process=args.process, train_steps=args.steps, hidden=args.hidden, layers=args.layers,
                    steps=args.sample_steps, seed=args.seed, batch=args.batch, lr=args.lr,
                    lattice_param=args.lattice_param, lattice_weight=args.lattice_weight,
                    sampler=args.sampler, n_samples=args.n_samples, pair_readout=args.pair_readout,
                    balance_classes=args.balance_classes, mid_t_fraction=args.mid_t_fraction,
                    type_known_fraction=args.type_known_fraction, ld_steps_per_level=args.ld_steps_per_level,
                    spacegroups=sgs, spacegroup_drop_fraction=args.spacegroup_drop_fraction)
    rows: list[dict] = []

    def log(r: dict) -> None:
        r = {**r, "seconds": round(time.time() - t0, 1)}
        rows.append(r)
        print(json.dumps(r), flush=True)

    def checkpoint(m: CrystalGenerator, step: int) -> None:
        save_generator(m, args.out, rows)
        print(f"checkpoint at step {step} ({time.time() - t0:.0f} s)", flush=True)

    init = load_generator(args.init).state_dict() if args.init else None
    if args.init:
        print(f"initialised from {args.init}", flush=True)
    model = fit_generator(ex, cfg, log=log, time_budget_s=args.time_budget, checkpoint=checkpoint,
                                 checkpoint_every=args.checkpoint_every, init_state=init)
    save_generator(model, args.out, rows)
    print(f"saved {args.out} ({time.time() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
