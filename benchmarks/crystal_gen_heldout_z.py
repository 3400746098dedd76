"""Is the crystal generator's predicted cell composition (atoms per species slot, i.e. Z)
right on the held-out rows? (docs/inverse_results.md, session 5)

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/crystal_gen_heldout_z.py out/strict.h5 \
        pretrained/diffcsp-inverse --every 2

The same rows as benchmarks/inverse_heldout.py (``--per-group 1 --every K``, clean). The
right composition of a target is that of its standardized primitive cell (the cell the
generator is trained to produce); printed as counts per (target space group, predicted
composition, right?).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

import numpy as np
import torch

from c2np.models.inverse.io import load_generator
from c2np.particle_descriptor import describe
from c2np.tasks import InverseTask


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("generator")
    ap.add_argument("--every", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    import spglib

    task = InverseTask.open(args.store, split="heldout-dev", per_group=1)
    task._rows = task._rows[:: args.every]      # the harness subset of inverse_heldout.py
    model = load_generator(args.generator)
    queries = list(task.perturbed_queries(seed=0))
    comps = model.predict_compositions(torch.as_tensor(model.features([describe(q.particle) for q in queries])))
    counts: Counter = Counter()
    for row, q, comp in zip(task._rows, queries, comps):
        rec = task._store.recipes
        cell = task._store.cells[rec.materials[int(rec.material_index[int(row)])]]
        std = spglib.standardize_cell(cell.to_spglib(), to_primitive=True, symprec=1e-3)  # type: ignore[arg-type]
        assert std is not None
        d = describe(q.particle)
        slot_by_z = {int(z): int(s) for z, s in zip(d.numbers, d.slot_of)}
        true = tuple(int(np.sum([slot_by_z.get(int(z), 2) == k for z in std[2]])) for k in range(3))
        counts[(task._target(int(row)).spacegroup, comp, comp == true)] += 1
    for (sg, comp, ok), n in sorted(counts.items()):
        print(f"space group {sg:3d}: predicted composition {comp} {'right' if ok else 'WRONG'}: {n} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
