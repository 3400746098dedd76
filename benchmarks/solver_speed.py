"""Carving and the crystallographic solver: exactness, accuracy and speed against the reference
approach, side by side as ratios.

Commands (each takes ``--help``):

* ``carve``: carving against an independent enumeration (exactness) and against the original
  fixed 20 x 20 x 20 ASE supercell (speed, and where that supercell clips the sphere), for six
  crystal families and several centres;
* ``solve``: the solver's joint and strict accuracy and median time per particle over radii,
  on clean and noisy particles carved with random centres and rotations (the 100 ms target at
  R = 30 Å as the reference);
* ``catalog``: the solver's joint accuracy on every catalog cell with the paper protocol's
  rotations (optionally with atoms shuffled and translated).

    PYTHONPATH=src python benchmarks/solver_speed.py carve
    PYTHONPATH=src nice -n 10 python benchmarks/solver_speed.py solve [--crystals prototypes]
    PYTHONPATH=src nice -n 10 python benchmarks/solver_speed.py catalog --radii 6,7 [--rotations 8]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import argparse
from collections import defaultdict
from dataclasses import dataclass


# --- carve: carving against an enumeration and the ASE supercell ---------------------------------
def brute(cell, radius, centre):  # type: ignore[no-untyped-def]
    from c2np.carving import interplanar_spacings

    n = int(np.ceil(radius / interplanar_spacings(cell.lattice_angstrom).min())) + 3
    r = np.arange(-n, n + 1)
    t = np.stack(np.meshgrid(r, r, r, indexing="ij"), -1).reshape(-1, 3) + np.floor(centre).astype(int)
    frac = (t[:, None, :] + cell.frac_coords[None]).reshape(-1, 3)
    pos = (frac - centre) @ cell.lattice_angstrom
    keep = np.linalg.norm(pos, axis=1) <= radius + 1e-6
    return np.tile(cell.numbers, len(t))[keep], pos[keep]


def supercell(cell, radius, centre):  # type: ignore[no-untyped-def]
    atoms = cell.to_ase().repeat((20, 20, 20))
    c = (np.asarray(centre) + 10) @ cell.lattice_angstrom
    pos = atoms.positions - c
    keep = np.linalg.norm(pos, axis=1) <= radius + 1e-6
    return atoms.numbers[keep], pos[keep]


def key(nums, pos):  # type: ignore[no-untyped-def]
    a = np.column_stack([nums, np.round(pos, 6)])
    return a[np.lexsort(a.T[::-1])]


def carve_main(argv: list[str] | None = None) -> int | None:
    from c2np.carving import carve
    from helpers import crystal_zoo

    print("| family | centre | R (Å) | atoms | same set as independent enumeration (max dev, Å) "
          "| c2np (ms) | 20³ supercell (ms) | ratio | supercell clips |")
    print("|---|---|---:|---:|---|---:|---:|---:|---|")
    for family, cell in crystal_zoo().items():
        for centre in ((0.0, 0.0, 0.0), (0.31, 0.77, 0.05)):
            for radius in (6.0, 30.0):
                c = np.asarray(centre)
                t0 = time.perf_counter()
                res = carve(cell, radius, centre_frac=c)
                t_ours = time.perf_counter() - t0
                nb, pb = brute(cell, radius, c)
                a, b = key(res.particle.numbers, res.particle.positions_angstrom), key(nb, pb)
                same = a.shape == b.shape and np.array_equal(a[:, 0], b[:, 0])
                dev = float(np.abs(a[:, 1:] - b[:, 1:]).max()) if same else float("nan")
                t0 = time.perf_counter()
                ns, _ = supercell(cell, radius, c)
                t_ref = time.perf_counter() - t0
                print(f"| {family} | {centre} | {radius:g} | {res.particle.n_atoms} | "
                      f"{'yes' if same and dev < 1e-9 else 'NO'} ({dev:.1e}) | {1e3 * t_ours:.1f} | "
                      f"{1e3 * t_ref:.0f} | {t_ref / t_ours:.0f}x | "
                      f"{'yes (' + str(len(ns)) + ' atoms)' if res.paper_supercell_clips else 'no'} |")



# --- solve: solver accuracy and speed over radii and noise ---------------------------------------
TIME_TARGET_S = 0.100


JOINT_LENGTH_TOL = 0.5


JOINT_ANGLE_TOL = 0.5


@dataclass(frozen=True)
class Trial:
    """One solver run on one particle."""

    material: str
    radius_angstrom: float
    noise_angstrom: float
    n_atoms: int
    ok: bool  # solver returned a result
    sg_right: bool
    joint: bool
    strict: bool
    max_length_err_angstrom: float
    max_angle_err_deg: float
    confidence: float
    seconds: float
    message: str = ""


def load_crystals(kind: str, cells_path: str | None) -> tuple[str, list]:
    """(description, list of UnitCell)."""
    from c2np.catalog.textbook import prototype_cell, prototype_names
    from c2np.cells import read_cells

    if cells_path:
        return f"CIFs from {cells_path}", read_cells(cells_path)
    if kind in ("auto", "catalog"):
        try:
            from c2np.catalog import load_catalog  # type: ignore[import-not-found]

            cells = load_catalog()
            cells = list(cells.values()) if isinstance(cells, dict) else list(cells)
            if cells:
                return f"perovskite catalog ({len(cells)} materials)", cells
        except ImportError as exc:
            if kind == "catalog":
                raise SystemExit("c2np.catalog is not importable") from exc
    return "textbook prototypes (c2np.catalog.textbook)", [prototype_cell(n) for n in prototype_names()]


def run_trial(cell, target, radius: float, noise: float, rng: np.random.Generator) -> Trial:
    """Carve, perturb, solve and score one particle."""
    from scipy.spatial.transform import Rotation

    from c2np.carving import carve
    from c2np.errors import C2NPInputError
    from c2np.solver import solve

    res = carve(cell, radius, centre_frac=rng.random(3),
                quaternion=Rotation.random(random_state=rng).as_quat())
    part = res.particle
    perm = rng.permutation(part.n_atoms)
    pos = part.positions_angstrom[perm] + rng.uniform(-20.0, 20.0, size=3)
    if noise > 0:
        pos = pos + rng.normal(scale=noise, size=pos.shape)
    t0 = time.perf_counter()
    try:
        out = solve(part.numbers[perm], pos)
    except C2NPInputError as exc:
        return Trial(cell.material_id, radius, noise, part.n_atoms, False, False, False, False,
                     np.inf, np.inf, 0.0, time.perf_counter() - t0, f"error: {exc}")
    dt = time.perf_counter() - t0
    got = out.lattice.as_array()
    want = np.array(target.lattice_params)
    dl = np.abs(got[:3] - want[:3])
    da = np.abs(got[3:] - want[3:])
    sg = out.spacegroup == target.spacegroup
    joint = sg and bool(np.all(dl <= JOINT_LENGTH_TOL)) and bool(np.all(da <= JOINT_ANGLE_TOL))
    strict = sg and bool(np.all(dl <= 0.01 * want[:3])) and bool(np.all(da <= JOINT_ANGLE_TOL))
    msg = "" if joint else (f"got {out.international} ({out.spacegroup}) "
                            f"{' '.join(f'{x:.3f}' for x in got)}, want {target.spacegroup} "
                            f"{' '.join(f'{x:.3f}' for x in want)}, confidence {out.confidence:.2f}")
    return Trial(cell.material_id, radius, noise, part.n_atoms, True, sg, joint, strict,
                 float(dl.max()), float(da.max()), out.confidence, dt, msg)


def _fmt_err(values: list[float]) -> str:
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)):
        return f"{np.median(arr):.4f} ({int((~np.isfinite(arr)).sum())} failed)"
    return f"{np.median(arr):.4f}"


def clean_table(trials: list[Trial]) -> list[str]:
    """Markdown rows: per radius, joint/strict/sg accuracy, failures, median and max time."""
    radii = sorted({t.radius_angstrom for t in trials})
    lines = ["| R (Å) | particles | median atoms | joint acc. | strict acc. | sg acc. | errors | "
             "median time (ms) | median / 100 ms |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in radii:
        ts = [t for t in trials if t.radius_angstrom == r]
        med = float(np.median([t.seconds for t in ts]))
        lines.append(
            f"| {r:g} | {len(ts)} | {int(np.median([t.n_atoms for t in ts]))} | "
            f"{np.mean([t.joint for t in ts]):.3f} | {np.mean([t.strict for t in ts]):.3f} | "
            f"{np.mean([t.sg_right for t in ts]):.3f} | {sum(not t.ok for t in ts)} | "
            f"{1000 * med:.1f} | {med / TIME_TARGET_S:.2f} |")
    from c2np.splits import PAPER

    for label, group in (("ID radii", PAPER.id_radii_angstrom), ("OOD radii", PAPER.ood_radii_angstrom)):
        ts = [t for t in trials if int(t.radius_angstrom) in group and t.radius_angstrom == int(t.radius_angstrom)]
        if ts:
            lines.append(f"| {label} | {len(ts)} | {int(np.median([t.n_atoms for t in ts]))} | "
                         f"{np.mean([t.joint for t in ts]):.3f} | {np.mean([t.strict for t in ts]):.3f} | "
                         f"{np.mean([t.sg_right for t in ts]):.3f} | {sum(not t.ok for t in ts)} | "
                         f"{1000 * float(np.median([t.seconds for t in ts])):.1f} | |")
    ts = trials
    lines.append(f"| all | {len(ts)} | {int(np.median([t.n_atoms for t in ts]))} | "
                 f"{np.mean([t.joint for t in ts]):.3f} | {np.mean([t.strict for t in ts]):.3f} | "
                 f"{np.mean([t.sg_right for t in ts]):.3f} | {sum(not t.ok for t in ts)} | "
                 f"{1000 * float(np.median([t.seconds for t in ts])):.1f} | |")
    return lines


def noise_table(trials: list[Trial], resolvable: dict[tuple[str, float], bool]) -> list[str]:
    """Markdown rows: per noise level and radius, sg accuracy (all, and on the crystals whose
    space group survives a tolerance of 3 σ), joint accuracy, lattice errors."""
    lines = ["| σ (Å) | R (Å) | particles | sg acc. | sg acc. (resolvable) | joint acc. | "
             "median max length err (Å) | median max angle err (°) | errors | median confidence |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in sorted({t.noise_angstrom for t in trials}):
        for r in sorted({t.radius_angstrom for t in trials if t.noise_angstrom == s}):
            ts = [t for t in trials if t.noise_angstrom == s and t.radius_angstrom == r]
            rs = [t for t in ts if resolvable[(t.material, s)]]
            res_acc = f"{np.mean([t.sg_right for t in rs]):.3f} ({len(rs)})" if rs else "–"
            lines.append(
                f"| {s:g} | {r:g} | {len(ts)} | {np.mean([t.sg_right for t in ts]):.3f} | {res_acc} | "
                f"{np.mean([t.joint for t in ts]):.3f} | "
                f"{_fmt_err([t.max_length_err_angstrom for t in ts])} | "
                f"{_fmt_err([t.max_angle_err_deg for t in ts])} | {sum(not t.ok for t in ts)} | "
                f"{np.median([t.confidence for t in ts]):.2f} |")
    return lines


SWEEP_FOR_TABLE = (1e-3, 0.01, 0.03, 0.05, 0.1)


def per_material_table(trials: list[Trial], sg_sweep: dict[str, list[int]]) -> list[str]:
    """Markdown rows: clean joint accuracy per material, with the space group of the source
    cell at growing tolerances (pseudo-symmetry: what noise of that size can hide)."""
    head = " | ".join(f"sg @ {x:g} Å" for x in SWEEP_FOR_TABLE)
    lines = [f"| material | particles | joint acc. | sg acc. | median time (ms) | {head} |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(SWEEP_FOR_TABLE)]
    for m in sorted({t.material for t in trials}):
        ts = [t for t in trials if t.material == m]
        lines.append(f"| {m} | {len(ts)} | {np.mean([t.joint for t in ts]):.3f} | "
                     f"{np.mean([t.sg_right for t in ts]):.3f} | "
                     f"{1000 * float(np.median([t.seconds for t in ts])):.1f} | "
                     + " | ".join(str(g) for g in sg_sweep[m]) + " |")
    return lines


def source_spacegroup(cell, symprec_angstrom: float) -> int:
    """Space group of the source cell at a tolerance (spglib, as the targets); 0 if none."""
    from c2np.cells import standardize
    from c2np.errors import C2NPInputError

    try:
        return standardize(cell, symprec_angstrom=symprec_angstrom).spacegroup
    except C2NPInputError:
        return 0


def failure_lines(trials: list[Trial], limit: int = 40) -> list[str]:
    """Markdown bullet list of the failed trials (first ``limit``), with counts per material."""
    bad = [t for t in trials if not t.joint]
    if not bad:
        return ["none"]
    from collections import Counter

    per = Counter((t.material, t.noise_angstrom) for t in bad)
    lines = ["Failures per (material, σ): " + ", ".join(f"{m} σ={s:g}: {k}" for (m, s), k in sorted(per.items())),
             ""]
    shown: list[Trial] = []
    taken: Counter = Counter()
    for t in bad:  # at most 4 per (material, σ) so that rare failures are listed too
        if taken[(t.material, t.noise_angstrom)] < 4 and len(shown) < limit:
            shown.append(t)
            taken[(t.material, t.noise_angstrom)] += 1
    lines += [f"- {t.material} R={t.radius_angstrom:g} σ={t.noise_angstrom:g} ({t.n_atoms} atoms): "
              f"{t.message}" for t in shown]
    if len(bad) > len(shown):
        lines.append(f"- ... and {len(bad) - len(shown)} more")
    return lines


def plot(clean: list[Trial], noisy: list[Trial], path: Path) -> None:
    """Space-group accuracy vs radius, one line per noise level (clean included)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    groups = {0.0: clean} | {s: [t for t in noisy if t.noise_angstrom == s]
                             for s in sorted({t.noise_angstrom for t in noisy})}
    for s, ts in groups.items():
        radii = sorted({t.radius_angstrom for t in ts})
        acc = [np.mean([t.sg_right for t in ts if t.radius_angstrom == r]) for r in radii]
        axes[0].plot(radii, acc, marker="o", label=f"σ = {s:g} Å")
    axes[0].set_xlabel("radius R (Å)")
    axes[0].set_ylabel("space-group accuracy")
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].legend()
    radii = sorted({t.radius_angstrom for t in clean})
    med = [1000 * np.median([t.seconds for t in clean if t.radius_angstrom == r]) for r in radii]
    axes[1].plot(radii, med, marker="o")
    axes[1].axhline(1000 * TIME_TARGET_S, color="grey", ls="--", label="target")
    axes[1].set_xlabel("radius R (Å)")
    axes[1].set_ylabel("median time per particle (ms)")
    axes[1].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def solve_main(argv: list[str] | None = None) -> int:
    """Run the evaluation, print the tables, write Markdown (and a PNG) if asked."""
    from tqdm import tqdm

    from c2np.cells import standardize
    from c2np.fileio import atomic_write

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--crystals", choices=["auto", "catalog", "prototypes"], default="auto")
    ap.add_argument("--cells", default=None, help="folder or zip of CIFs (overrides --crystals)")
    ap.add_argument("--radii", default="6-30", help="clean radii, e.g. '6-30' or '6,7,10,30'")
    ap.add_argument("--samples", type=int, default=2, help="particles per (crystal, radius), clean")
    ap.add_argument("--noise", default="0.01,0.03,0.05,0.1", help="σ values (Å)")
    ap.add_argument("--noise-radii", default="6,7,10,15,20,30")
    ap.add_argument("--noise-samples", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20260101)
    ap.add_argument("--out", type=Path, default=None, help="Markdown file for the tables")
    ap.add_argument("--plot", type=Path, default=None, help="PNG of accuracy and time vs radius")
    args = ap.parse_args(argv)

    def parse_radii(text: str) -> list[float]:
        if "-" in text and "," not in text:
            lo, hi = (int(x) for x in text.split("-"))
            return [float(r) for r in range(lo, hi + 1)]
        return [float(x) for x in text.split(",") if x]

    desc, cells = load_crystals(args.crystals, args.cells)
    targets = [standardize(c) for c in cells]
    rng = np.random.default_rng(args.seed)
    radii = parse_radii(args.radii)
    noise_levels = [float(x) for x in args.noise.split(",") if x]
    noise_radii = parse_radii(args.noise_radii)

    # warm-up (imports, first-call overheads) so that timings are per-particle work only
    run_trial(cells[0], targets[0], 8.0, 0.0, np.random.default_rng(0))

    clean: list[Trial] = []
    jobs = [(c, t, r) for r in radii for c, t in zip(cells, targets) for _ in range(args.samples)]
    for cell, target, r in tqdm(jobs, desc="clean", file=sys.stderr):
        clean.append(run_trial(cell, target, r, 0.0, rng))
    noisy: list[Trial] = []
    jobs_n = [(c, t, r, s) for s in noise_levels for r in noise_radii for c, t in zip(cells, targets)
              for _ in range(args.noise_samples)]
    for cell, target, r, s in tqdm(jobs_n, desc="noise", file=sys.stderr):
        noisy.append(run_trial(cell, target, r, s, rng))

    import moyopy
    import scipy

    sg_sweep = {c.material_id: [source_spacegroup(c, x) for x in SWEEP_FOR_TABLE] for c in cells}
    resolvable = {(c.material_id, s): source_spacegroup(c, 3 * s) == t.spacegroup
                  for c, t in zip(cells, targets) for s in noise_levels}

    out: list[str] = [
        f"Crystals: {desc}; {len(cells)} crystals: {', '.join(c.material_id for c in cells)}.",
        f"Seed {args.seed}; {args.samples} clean particle(s) per (crystal, radius), "
        f"{args.noise_samples} per (crystal, radius, σ); random centre, rotation, atom order and "
        f"translation. Solver errors count as failures. numpy {np.__version__}, scipy "
        f"{scipy.__version__}, moyopy {moyopy.__version__}.", "",
        "### (a) Clean particles", "", *clean_table(clean), "",
        "### (a') Clean particles per material", "",
        "The last columns give the space group of the source cell at growing tolerances: where "
        "it changes below a tolerance, noise of that size hides the true group.", "",
        *per_material_table(clean, sg_sweep), "",
        "### (b) Gaussian position noise", "",
        "σ per Cartesian component. *Resolvable*: the crystals whose space group at a tolerance "
        "of 3 σ is still the target's (their count in brackets); for the others the noise hides "
        "the distortion that lowers the symmetry.", "",
        *noise_table(noisy, resolvable), "",
        "### Failed particles (clean)", "", *failure_lines(clean), "",
        "### Failed particles (noise)", "", *failure_lines(noisy), "",
    ]
    r30 = [t.seconds for t in clean if t.radius_angstrom == 30.0]
    if r30:
        med = float(np.median(r30))
        out.append(f"Median time per particle at R = 30 Å: {1000 * med:.1f} ms "
                   f"({med / TIME_TARGET_S:.2f} x the 100 ms target).")
    text = "\n".join(out) + "\n"
    print(text)
    if args.out is not None:
        with atomic_write(args.out) as fh:
            fh.write(text)
    if args.plot is not None:
        plot(clean, noisy, args.plot)
    return 0



# --- catalog: solver accuracy on the catalog -----------------------------------------------------
PAPER_EVAL_ROTATIONS = (1, 8, 64, 70, 72, 96, 99, 102)


LENGTH_TOL_ANGSTROM = 0.5


ANGLE_TOL_DEG = 0.5


def catalog_main(argv: list[str] | None = None) -> int | None:
    from tqdm import tqdm

    from c2np.carving import carve
    from c2np.catalog import load_catalog
    from c2np.cells import standardize
    from c2np.solver import solve
    from c2np.splits import build_recipes

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--radii", default="6,7", help="radii in Å, e.g. '6,7'")
    ap.add_argument("--rotations", type=int, default=len(PAPER_EVAL_ROTATIONS),
                    help="how many of the eval rotation indices to use")
    ap.add_argument("--material", default=None, help="only materials whose id contains this")
    ap.add_argument("--shuffle", type=int, default=None, help="permute and translate atoms (seed)")
    args = ap.parse_args(argv)

    radii = [int(x) for x in args.radii.split(",")]
    rotations = PAPER_EVAL_ROTATIONS[:args.rotations]
    rng = np.random.default_rng(args.shuffle if args.shuffle is not None else 0)
    loaded = load_catalog()
    cells = list(loaded.values()) if isinstance(loaded, dict) else list(loaded)
    table = build_recipes(cells, "paper", radii_angstrom=radii)
    by_id = {c.material_id: c for c in cells}
    targets = {c.material_id: standardize(c) for c in cells}

    counts: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    seconds: dict[int, list[float]] = defaultdict(list)
    failures: list[tuple[int, str, int, str]] = []
    for radius in radii:
        for mi, material in enumerate(tqdm(table.materials, desc=f"R={radius}", leave=False)):
            if args.material and args.material not in material:
                continue
            rows = np.flatnonzero((table.material_index == mi) & (table.radius_angstrom == radius)
                                  & np.isin(table.rotation_index, rotations))[:len(rotations)]
            st = targets[material]
            want = st.lattice_params
            for row in rows:
                particle = carve(by_id[material], radius, quaternion=table.quaternion[row]).particle
                numbers, positions = particle.numbers, particle.positions_angstrom
                if args.shuffle is not None:
                    perm = rng.permutation(len(numbers))
                    numbers, positions = numbers[perm], positions[perm] + rng.uniform(-50, 50, 3)
                t0 = time.perf_counter()
                try:
                    res = solve(numbers, positions)
                    errs = np.abs(res.lattice.as_array() - np.array(want))
                    ok = (res.spacegroup == st.spacegroup and bool(np.all(errs[:3] <= LENGTH_TOL_ANGSTROM))
                          and bool(np.all(errs[3:] <= ANGLE_TOL_DEG)))
                    msg = (f"got {res.spacegroup} {np.round(res.lattice.as_array(), 2)} want {st.spacegroup}, "
                           f"confidence {res.confidence:.2f}")
                except Exception as exc:  # a solver error is a failure, reported
                    ok, msg = False, f"error: {exc}"
                seconds[radius].append(time.perf_counter() - t0)
                counts[(radius, st.spacegroup)][0] += int(ok)
                counts[(radius, st.spacegroup)][1] += 1
                if not ok:
                    failures.append((radius, material, int(table.rotation_index[row]), msg))
    for f in failures:
        print(f"R={f[0]} {f[1]} rot_{f[2]}: {f[3]}")
    print("\n| R (Å) | space group | right | particles |\n|---:|---:|---:|---:|")
    for (radius, sg), (right, total) in sorted(counts.items()):
        print(f"| {radius} | {sg} | {right} | {total} |")
    print("\n| R (Å) | particles | joint acc. | median time (ms) |\n|---:|---:|---:|---:|")
    for radius in radii:
        right = sum(v[0] for k, v in counts.items() if k[0] == radius)
        total = sum(v[1] for k, v in counts.items() if k[0] == radius)
        med = 1e3 * float(np.median(seconds[radius])) if seconds[radius] else float("nan")
        print(f"| {radius} | {total} | {right / max(total, 1):.4f} | {med:.1f} |")



COMMANDS = {
    "carve": (carve_main, "carving against an enumeration and the ASE supercell"),
    "solve": (solve_main, "solver accuracy and speed over radii and noise"),
    "catalog": (catalog_main, "solver accuracy on the catalog"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=sorted(COMMANDS), help="; ".join(f"{k}: {v[1]}" for k, v in COMMANDS.items()))
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the command's own options (COMMAND --help)")
    a = ap.parse_args(argv)
    sys.argv[0] = f"{ap.prog} {a.command}"     # the command's own usage line names it
    return int(COMMANDS[a.command][0](a.args) or 0)


if __name__ == "__main__":
    sys.exit(main())
