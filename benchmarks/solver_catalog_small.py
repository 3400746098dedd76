"""Solver joint accuracy on the catalog at small radii with the paper OOD rotations (issue 5).

Carves every catalog cell at each radius with the paper protocol quaternions of rotation
indices 1, 8, 64, 70, 72, 96, 99, 102 (the demo eval subset), solves, and compares with
``standardize(cell)`` (space group and a, b, c, alpha, beta, gamma within 0.5 A / 0.5 deg).
A solver error counts as a failure. Prints failures, per-space-group counts, accuracy and
median time per particle.

With ``--shuffle SEED`` every particle's atoms are also permuted and translated by a random
vector (seeded), to check that the answer does not depend on atom order or position.

Usage: PYTHONPATH=src nice -n 10 python benchmarks/solver_catalog_small.py 6,7 [n_rotations] [material] [--shuffle SEED]
"""
import sys, time, numpy as np
from tqdm import tqdm
shuffle_seed = None
if "--shuffle" in sys.argv:
    i = sys.argv.index("--shuffle"); shuffle_seed = int(sys.argv[i + 1]); del sys.argv[i:i + 2]
rng = np.random.default_rng(shuffle_seed if shuffle_seed is not None else 0)
from c2np.catalog import load_catalog
from c2np.splits import build_recipes
from c2np.carving import carve
from c2np.cells import standardize
from c2np.solver import solve
radii = [float(x) for x in sys.argv[1].split(",")]
nrot = int(sys.argv[2]) if len(sys.argv) > 2 else 8
only = sys.argv[3] if len(sys.argv) > 3 else None
cells = load_catalog(); cells = list(cells.values()) if isinstance(cells, dict) else list(cells)
rt = build_recipes(cells, 'paper', radii_angstrom=[int(r) for r in radii])
bym = {c.material_id: c for c in cells}
std = {c.material_id: standardize(c) for c in cells}
from collections import defaultdict
res = defaultdict(lambda: [0, 0]); times = defaultdict(list); fails = []
rots = [1, 8, 64, 70, 72, 96, 99, 102][:nrot]
for R in radii:
  for mi, m in enumerate(tqdm(rt.materials, desc=f"R={R}", leave=False)):
    if only and only not in m: continue
    sel = np.flatnonzero((rt.material_index == mi) & (rt.radius_angstrom == R) & np.isin(rt.rotation_index, rots))
    sel = sel[:nrot]
    st = std[m]
    for row in sel:
        p = carve(bym[m], R, quaternion=rt.quaternion[row]).particle
        numbers, positions = p.numbers, p.positions_angstrom
        if shuffle_seed is not None:
            perm = rng.permutation(len(numbers))
            numbers, positions = numbers[perm], positions[perm] + rng.uniform(-50, 50, 3)
        t = time.perf_counter()
        try:
            r = solve(numbers, positions)
            ok = (r.spacegroup == st.spacegroup and all(abs(x - y) <= 0.5 for x, y in zip(r.lattice_params, (st.a_angstrom, st.b_angstrom, st.c_angstrom, st.alpha_deg, st.beta_deg, st.gamma_deg))))
            msg = f"sg {r.spacegroup} vs {st.spacegroup} {np.round(r.lattice_params,2)} conf {r.confidence:.2f}"
        except Exception as e:
            ok = False; msg = repr(e)[:100]
        times[R].append(time.perf_counter() - t)
        key = (R, st.spacegroup); res[key][0] += ok; res[key][1] += 1
        if not ok: fails.append((R, m, int(rt.rotation_index[row]), msg))
for f in fails: print(*f)
for k in sorted(res): print(k, res[k][0], "/", res[k][1])
for R in radii:
    tot = sum(v[0] for k, v in res.items() if k[0] == R); n = sum(v[1] for k, v in res.items() if k[0] == R)
    print(f"R={R}: joint {tot}/{n} = {tot/max(n,1):.4f}  median {1e3*np.median(times[R]):.1f} ms")
