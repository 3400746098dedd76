"""A/B of the generator's fractional-coordinate readout on cubic training pairs
(docs/inverse_results.md): train the same small DiffCSP generator with and without the
periodic pair readout and count generated cells with the right perovskite site assignment.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/crystal_gen_ab.py out/gen_examples.npz 0 600
    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/crystal_gen_ab.py out/gen_examples.npz 1 600

Arguments: a training-pair cache written by train_crystal_gen.py, 1/0 (pair readout on/off),
training steps. Prints "<readout> <steps> correct k / 20".
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.training import fit_generator
from train_crystal_gen import load_examples  # noqa: E402


def right_perovskite(frac: np.ndarray) -> bool:
    """Slots H,H,H,B,A: B at the origin, H at the three face centres of the B cube, A at
    the body centre (within 0.02 in fractional units)."""
    f = (frac - frac[3] + 0.5) % 1 - 0.5
    r = np.round(f * 2) / 2
    h = sorted(tuple(float(v) for v in np.abs(x)) for x in r[:3])
    return (h == sorted([(0.5, 0.0, 0.0), (0.0, 0.5, 0.0), (0.0, 0.0, 0.5)])
            and tuple(np.abs(r[4])) == (0.5, 0.5, 0.5) and float(np.abs(f - r).max()) < 0.02)


def main() -> int:
    cache, pair, steps = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
    torch.set_num_threads(1)
    ex = [e for e in load_examples(Path(cache)) if len(e.slots) == 5]
    cfg = GenConfig(hidden=64, layers=3, train_steps=steps, batch=32, lattice_param="x0", pair_readout=pair,
                    sampler="pc", lr=2e-3)
    t = time.time()
    model = fit_generator(ex, cfg)
    print(f"trained {steps} steps in {time.time() - t:.0f} s", flush=True)
    feats = torch.as_tensor(model.features([e.descriptor for e in ex[:40:2]]))
    cells = model.sample(feats, [(3, 1, 1)] * len(feats), torch.Generator().manual_seed(0))
    ok = sum(right_perovskite(fr) for _, fr, _ in cells)
    print(f"{'pair' if pair else 'linear'} {steps} correct {ok} / {len(cells)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
