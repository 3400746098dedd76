"""Dataset store speed and size, side by side with the reference approach, as ratios.

Commands (each takes ``--help``):

* ``build``: build and read speed, store size and peak memory of ``c2np build`` against the
  original generator (a pre-carved particle rotated and written as one text XYZ file per
  sample with ASE, 2,114 files per material), run on the same material in the same process;
* ``shards``: build and read throughput of a sharded store (``build --shards K``) against the
  single-file store of the same recipe (sharded / single);
* ``check``: what one ``c2np evaluate`` pays before scoring (opening the store and its check),
  this version against the ``src`` of an earlier checkout (``--against``), with a bit-for-bit
  check of the re-carved particles;
* ``export``: the loaders' training rows against the store's raw split, and the Parquet
  export's size and cost against the HDF5 store.

    PYTHONPATH=src nice -n 10 python benchmarks/store_speed.py build [--materials N]
    PYTHONPATH=src nice -n 10 python benchmarks/store_speed.py shards [--materials 82] [--json OUT]
    PYTHONPATH=src nice -n 10 python benchmarks/store_speed.py check STORE [--against /tmp/prev/src]
    PYTHONPATH=src nice -n 10 python benchmarks/store_speed.py export [--strict-materials 10]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


# --- build: c2np build against one XYZ file per sample -------------------------------------------
def reference_build(cell, table, out: Path) -> float:
    """The original approach: carve each (material, R) once, then for every sample rotate it
    with scipy and write a text XYZ file via ASE. Returns seconds."""
    from ase import Atoms
    from ase.io import write
    from scipy.spatial.transform import Rotation

    from c2np.carving import carve

    t0 = time.perf_counter()
    base = {}
    for r, k, q in zip(table.radius_angstrom, table.rotation_index, table.quaternion):
        if r not in base:
            base[r] = carve(cell, int(r)).particle
        p = base[r]
        pos = Rotation.from_quat(q).apply(np.array(p.positions_angstrom))
        folder = out / "quaternions" / cell.material_id / f"R{r}" / "xyz"
        folder.mkdir(parents=True, exist_ok=True)
        write(folder / f"rot_{k}.xyz", Atoms(numbers=p.numbers, positions=pos), format="xyz")
    return time.perf_counter() - t0


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def build_main(argv: list[str] | None = None) -> int | None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--materials", type=int, default=8, help="materials in the c2np build")
    ap.add_argument("--reference-materials", type=int, default=1, help="materials for the reference")
    args = ap.parse_args(argv)

    from c2np.splits import build_recipes
    from c2np.store import DatasetStore, build_store

    try:
        from c2np.catalog import load_catalog

        cells = load_catalog()[: args.materials]
    except Exception:  # catalog not shipped: use cubic perovskites built in code
        from c2np.cells import UnitCell

        cells = [UnitCell(f"P{i}", np.eye(3) * (3.9 + 0.05 * i), [19, 12, 1, 1, 1],
                          [[0.5, 0.5, 0.5], [0, 0, 0], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]])
                 for i in range(args.materials)]
    tmp = Path(tempfile.mkdtemp(prefix="c2np-bench-"))
    try:
        t0 = time.perf_counter()
        path = build_store(cells, tmp / "ds.h5", progress=False)
        t_build = time.perf_counter() - t0
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        size = os.path.getsize(path)
        ds = DatasetStore.open(path)
        n = len(ds)
        t0 = time.perf_counter()
        atoms = 0
        for row in range(n):
            nums, _ = ds.particle_arrays(row)
            atoms += len(nums)
        t_read = time.perf_counter() - t0

        ref_times, ref_sizes = [], []
        for cell in cells[: args.reference_materials]:
            table = build_recipes([cell], "paper")
            out = tmp / "ref" / cell.material_id
            ref_times.append(reference_build(cell, table, out))
            ref_sizes.append(du(out))
            shutil.rmtree(out)
        per_mat_ref_s = float(np.mean(ref_times))
        per_mat_ref_b = float(np.mean(ref_sizes))
        per_mat_s = t_build / len(cells)
        per_mat_b = size / len(cells)
        rows = [
            ("build time per material (s)", per_mat_ref_s, per_mat_s),
            ("store size per material (MB)", per_mat_ref_b / 1e6, per_mat_b / 1e6),
        ]
        print(f"{len(cells)} materials, {n} samples, {atoms} atoms read; reference on "
              f"{args.reference_materials} material(s)\n")
        print("| quantity | original approach | c2np | ratio |")
        print("|---|---:|---:|---:|")
        for name, ref, ours in rows:
            print(f"| {name} | {ref:.3f} | {ours:.4f} | {ref / ours:.0f}x |")
        print(f"| read: rotated particles per second | - | {n / t_read:,.0f} | |")
        print(f"| read: atoms per second | - | {atoms / t_read / 1e6:.1f} M | |")
        print(f"| peak RSS of the build (MB) | - | {peak_mb:.0f} | |")
        full = 81 * per_mat_s
        print(f"\nextrapolated full paper build (81 materials, 171,234 samples): {full:.1f} s, "
              f"{81 * per_mat_b / 1e6:.1f} MB (original: {81 * per_mat_ref_s / 60:.0f} min, "
              f"{81 * per_mat_ref_b / 1e9:.1f} GB)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)



# --- shards: sharded against single-file stores --------------------------------------------------
def _best(fn: Any, repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _read_all(store: Any) -> int:
    atoms = 0
    for row in range(len(store)):
        atoms += len(store.particle_arrays(row)[0])
    return atoms


def measure(n_materials: int, radii: list[int] | None, shard_counts: list[int], workers: int, repeat: int) -> dict:
    from c2np.catalog import load_catalog
    from c2np.executor import LocalExecutor
    from c2np.store import DatasetStore, build_store

    cells = load_catalog()[:n_materials]
    configs = [None, *shard_counts]
    best: dict[tuple[Any, str], float] = {}
    rows = []

    def keep(key: tuple[Any, str], seconds: float) -> None:
        best[key] = min(best.get(key, float("inf")), seconds)

    with tempfile.TemporaryDirectory() as tmp:
        def build(k: int | None, w: int) -> Path:
            out = Path(tmp) / (f"k{k}_w{w}" if k else f"single_w{w}.h5")
            with LocalExecutor(w) as ex:
                return build_store(cells, out, radii_angstrom=radii, progress=False, executor=ex, shards=k)

        stores: dict[Any, Any] = {}
        atoms: dict[Any, int] = {}
        for _ in range(repeat):  # round robin, so a burst of load from elsewhere hits every row alike
            for k in configs:
                t, path = _best(lambda k=k: build(k, 1), 1)
                keep((k, "build_s"), t)
                if workers > 1:
                    keep((k, f"build_{workers}w_s"), _best(lambda k=k: build(k, workers), 1)[0])
                t, stores[k] = _best(lambda p=path: DatasetStore.open(p), 1)
                keep((k, "open_s"), t)
                t, atoms[k] = _best(lambda s=stores[k]: _read_all(s), 1)
                keep((k, "read_s"), t)
        for k in configs:
            store = stores[k]
            files = store.files()
            rows.append({"shards": k or 0, "build_s": best[(k, "build_s")],
                         f"build_{workers}w_s": best.get((k, f"build_{workers}w_s"), float("nan")),
                         "open_s": best[(k, "open_s")], "read_s": best[(k, "read_s")], "samples": len(store),
                         "atoms_read": atoms[k], "bytes": sum(f.stat().st_size for f in files),
                         "files": len(files), "fingerprint": store.fingerprint})
    single = rows[0]
    for r in rows:
        for key in ("build_s", f"build_{workers}w_s", "open_s", "read_s", "bytes"):
            r[key.replace("_s", "") + "_ratio"] = r[key] / single[key] if single[key] else float("nan")
    return {"materials": [c.material_id for c in cells], "radii": radii, "workers": workers,
            "load_average": os.getloadavg()[0], "rows": rows}


def table(m: dict) -> str:
    w = m["workers"]
    lines = [f"{len(m['materials'])} materials, radii {m['radii'] or 'all'}, {m['rows'][0]['samples']} samples, "
             f"{m['rows'][0]['atoms_read']:,} atoms read; load average {m['load_average']:.1f}", "",
             f"| store | build (s) | build, {w} workers (s) | open (s) | read all samples (s) | bytes | "
             f"build ratio | build ratio, {w} workers | open ratio | read ratio | bytes ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in m["rows"]:
        name = "single file" if r["shards"] == 0 else f"{r['shards']} shards"
        lines.append(f"| {name} | {r['build_s']:.2f} | {r[f'build_{w}w_s']:.2f} | {r['open_s']:.3f} | "
                     f"{r['read_s']:.2f} | {r['bytes']:,} | {r['build_ratio']:.2f} | {r[f'build_{w}w_ratio']:.2f} | "
                     f"{r['open_ratio']:.2f} | {r['read_ratio']:.2f} | {r['bytes_ratio']:.3f} |")
    return "\n".join(lines)


def shards_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--materials", type=int, default=82)
    ap.add_argument("--radii", default="", help="comma-separated radii (default: all of the protocol)")
    ap.add_argument("--shards", default="1,4,16")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    radii = [int(x) for x in a.radii.split(",")] if a.radii else None
    m = measure(a.materials, radii, [int(x) for x in a.shards.split(",")],
                a.workers, a.repeat)
    print(table(m))
    if a.json is not None:
        a.json.write_text(json.dumps(m, indent=1) + "\n")
    return 0



# --- check: the store check, this version against an earlier one ---------------------------------
def compare_carvers(ds: Any, src: Path) -> int:
    """Carve every base particle of ``ds`` with both carvers in turn; 1 if any differs."""
    from c2np import carving

    spec = importlib.util.spec_from_file_location("carving_previous", src / "c2np" / "carving.py")
    assert spec is not None and spec.loader is not None
    prev = importlib.util.module_from_spec(spec)
    sys.modules["carving_previous"] = prev
    spec.loader.exec_module(prev)
    t = ds.recipes
    pairs = sorted({(int(m), int(r)) for m, r in zip(t.material_index, t.radius_angstrom)})
    centre = tuple(float(x) for x in t.centre_frac)
    cpu = {"previous": 0.0, "this version": 0.0}
    for m, r in pairs:
        cell = ds.cells[t.materials[m]]
        t0 = time.process_time()
        a = prev.carve(cell, r, centre_frac=centre)
        t1 = time.process_time()
        b = carving.carve(cell, r, centre_frac=centre)
        cpu["previous"] += t1 - t0
        cpu["this version"] += time.process_time() - t1
        same = (a.particle.numbers.tobytes() == b.particle.numbers.tobytes()
                and a.particle.positions_angstrom.tobytes() == b.particle.positions_angstrom.tobytes()
                and a.boundary_margin_angstrom == b.boundary_margin_angstrom
                and a.paper_supercell_clips == b.paper_supercell_clips)
        if not same:
            print(f"{t.materials[m]} R={r}: the carvers differ")
            return 1
    print(f"{len(pairs)} base particles bit-identical; carve CPU s: "
          + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
          + f" (ratio {cpu['this version'] / cpu['previous']:.2f})")
    return 0


def check_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--against", metavar="DIR", help="src folder of an earlier checkout")
    args = ap.parse_args(argv)
    import c2np.store.verify as st  # the module whose re-carve is timed

    if args.against:
        return compare_carvers(st.DatasetStore.open(args.store), Path(args.against))

    rows: dict[str, list[float]] = {"open": [], "re-carve": [], "compare + fingerprint": []}
    for _ in range(args.repeats):
        t = time.process_time()
        ds = st.DatasetStore.open(args.store)
        t1 = time.process_time()
        carve = st.carve_base_particles
        spent = [0.0]

        def timed(*a, carve=carve, spent=spent, **k):  # the check's re-carve, on its own
            s = time.process_time()
            out = carve(*a, **k)
            spent[0] += time.process_time() - s
            return out

        st.carve_base_particles = timed
        try:
            report = st.verify_opened(ds, check_recipes=False)
        finally:
            st.carve_base_particles = carve
        t2 = time.process_time()
        if not report.ok:
            print("store check failed:", report.problems[:3])
            return 1
        rows["open"].append(t1 - t)
        rows["re-carve"].append(spent[0])
        rows["compare + fingerprint"].append(t2 - t1 - spent[0])
    n = len(ds.base.material_index)
    print(f"{args.store}: {n} base particles, {len(ds.base.numbers):,} atoms")
    for k, v in rows.items():
        print(f"  {k:24s} {statistics.median(v):6.2f} CPU s")
    return 0



# --- export: loader rows and the Parquet export against the store --------------------------------
def export_main(argv: list[str] | None = None) -> int | None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict-materials", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None, help="Also write the numbers as JSON here.")
    args = ap.parse_args(argv)

    from c2np.catalog import load_catalog
    from c2np.loaders import loader_rows
    from c2np.parquet_export import export_parquet, read_parquet_export
    from c2np.store import DatasetStore, build_store

    cells = load_catalog()
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ds = DatasetStore.open(build_store(cells[:args.strict_materials], root / "strict.h5", "strict",
                                           progress=False))
        t = ds.recipes
        held = [t.materials.index(m) for m in t.heldout_materials]
        raw, rows = ds.rows("train"), loader_rows(t, "train")
        out["strict"] = {"n_materials": len(t.materials), "n_samples": len(t),
                         "heldout_materials": list(t.heldout_materials),
                         "raw_train_rows": int(len(raw)),
                         "raw_train_rows_of_heldout_materials": int(np.isin(t.material_index[raw], held).sum()),
                         "loader_train_rows": int(len(rows)),
                         "loader_train_rows_of_heldout_materials": int(np.isin(t.material_index[rows], held).sum())}
        path = build_store(cells, root / "paper.h5", "paper", progress=False)
        ds = DatasetStore.open(path)
        t0 = time.perf_counter()
        files = export_parquet(ds, root / "export")
        t1 = time.perf_counter()
        check = read_parquet_export(root / "export").check()
        t2 = time.perf_counter()
        out["paper"] = {"n_materials": len(ds.materials), "n_samples": len(ds), "store_bytes": path.stat().st_size,
                        "export_bytes": {f.name: f.stat().st_size for f in files},
                        "export_seconds": round(t1 - t0, 2), "read_and_check_seconds": round(t2 - t1, 2),
                        "check_ok": check.ok, "fingerprint_equal": check.fingerprint_recomputed == ds.fingerprint}
    text = json.dumps(out, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")



COMMANDS = {
    "build": (build_main, "c2np build against one XYZ file per sample"),
    "shards": (shards_main, "sharded against single-file stores"),
    "check": (check_main, "the store check, this version against an earlier one"),
    "export": (export_main, "loader rows and the Parquet export against the store"),
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
