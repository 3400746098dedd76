"""Where does a crystal generator go wrong on its *training* materials? (docs/inverse_results.md)

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/crystal_gen_diagnose.py GENERATOR_FOLDER \
        out/gen_examples_v2.npz [sample_steps=300 ...]

1. Denoising loss per composition class and diffusion time (64 pairs per class, seeded):
   ``loss / E[target^2]`` at t = 1 .. T. A translation-invariant network cannot predict the
   mean noise displacement of a cell, so its floor at small sigma is about 1/n of the
   target variance for an n-atom cell.
2. One generated cell for each of the 30 training pairs of ``crystal_gen_train_repro.py``
   (one per distinct lattice, every 2nd): whether the composition is right, the largest
   lattice-matrix error (Å), the shortest interatomic distance (Å), the fraction of atoms
   of each species slot within 0.3 Å of a target site (best translation, one-to-one per
   slot) and the space group read out (``read_rule="longest"``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

sys.path.insert(0, str(Path(__file__).resolve().parent))
from c2np.cells import standardize  # noqa: E402
from c2np.models.inverse.diffcsp import wrapped_score
from c2np.models.inverse.examples import composition_key
from c2np.models.inverse.readout import min_pair_distance_angstrom, read_cell_to_prediction
from crystal_gen_train_repro import load_from_argv, repro_pairs  # noqa: E402


def _mic(d: np.ndarray, lat: np.ndarray) -> np.ndarray:
    return np.linalg.norm(((d + 0.5) % 1.0 - 0.5) @ lat, axis=-1)


def matched_fraction(fg: np.ndarray, sg: np.ndarray, ft: np.ndarray, st: np.ndarray, lat: np.ndarray,
                     *, tol_angstrom: float = 0.3) -> list[float]:
    """Per slot, the fraction of generated atoms within ``tol_angstrom`` of a distinct target
    site of the same slot, at the best translation mapping a slot-1 atom onto a slot-1 site."""
    best: np.ndarray | None = None
    k1 = int(np.flatnonzero(st == 1)[0])
    for i in np.flatnonzero(sg == 1):
        f = (fg + ft[k1] - fg[i]) % 1.0
        d = np.zeros(len(fg))
        for s in np.unique(st):
            a, b = np.flatnonzero(sg == s), np.flatnonzero(st == s)
            cost = _mic(f[a][:, None] - ft[b][None], lat)
            r, c = linear_sum_assignment(cost)
            d[a[r]] = cost[r, c]
        if best is None or d.max() < best.max():
            best = d
    assert best is not None
    return [float(np.mean(best[sg == s] < tol_angstrom)) for s in np.unique(st)]


def loss_table(model, ex) -> None:
    g = torch.Generator().manual_seed(1)
    by: dict = {}
    for e in ex:
        by.setdefault(composition_key(e.slots), []).append(e)
    T = model.cfg.steps
    times = sorted({1, *range(T // 10, T + 1, T // 10)})
    for comp, es in sorted(by.items()):
        es = es[:64]
        feats = torch.as_tensor(model.features([e.descriptor for e in es]))
        f0 = torch.as_tensor(np.stack([e.frac for e in es]), dtype=torch.float32)
        slot = torch.as_tensor(np.stack([e.slots for e in es]))
        mask = torch.ones_like(slot, dtype=torch.bool)
        lat_n = np.stack([e.lattice_angstrom / e.descriptor.scale_angstrom for e in es])
        xl0 = torch.as_tensor((lat_n - model.lat_mean.numpy()) / float(model.lat_std), dtype=torch.float32)
        cells = []
        with torch.no_grad():
            cond = model.condition(feats)
            for t in times:
                tt = torch.full((len(es),), t)
                ab = model.alpha_bar[tt][:, None, None]
                xlt = ab.sqrt() * xl0 + (1 - ab).sqrt() * torch.randn(xl0.shape, generator=g)
                sig = model.sigma[tt][:, None, None].expand_as(f0)
                noise = torch.randn(f0.shape, generator=g) * sig
                target = wrapped_score(noise, sig)
                _, out_f, _ = model.net(xlt, (f0 + noise) % 1.0, slot, mask, model.time_embedding(tt), cond)
                cells.append(f"t{t}(sigma {float(model.sigma[t]):.3f}) {float(((out_f - target) ** 2).mean()):.3f}"
                             f"/{float((target ** 2).mean()):.2f}")
        print(f"composition {comp} ({len(by[comp])} pairs):", "  ".join(cells))


def main() -> int:
    torch.set_num_threads(1)
    ex, model, over = load_from_argv(sys.argv)
    loss_table(model, ex)
    sub = repro_pairs(ex)
    feats = torch.as_tensor(model.features([e.descriptor for e in sub]))
    comps = model.predict_compositions(feats)
    g = torch.Generator().manual_seed(0)
    t0 = time.time()
    for b, e in enumerate(sub):
        tgt = standardize((e.lattice_angstrom, e.frac, e.descriptor.slot_numbers[e.slots]), symprec_angstrom=1e-3)
        ((xl, fr, sl),) = model.sample(feats[b:b + 1], [comps[b]], g)
        lat, frac, numbers = model.cell_of(xl, fr, sl, e.descriptor)
        comp_ok = composition_key(sl) == composition_key(e.slots)
        res = read_cell_to_prediction(lat, frac, numbers, rule="longest")
        match = matched_fraction(fr, sl, e.frac, e.slots, e.lattice_angstrom) if comp_ok else None
        print(f"target {tgt.spacegroup:3d}: composition {'right' if comp_ok else 'WRONG'}, "
              f"lattice error {np.abs(lat - e.lattice_angstrom).max():.3f} Å, "
              f"shortest pair {min_pair_distance_angstrom(lat, frac):.2f} Å, "
              f"matched per slot {None if match is None else [round(m, 2) for m in match]}, "
              f"read {None if res is None else res[1]}")
    print(f"{over} {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
