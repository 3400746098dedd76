"""What one ``c2np evaluate`` pays before scoring: opening the store and its check (issue 15).

Times, in this process (one thread, CPU seconds, median of ``--repeats``): opening the
store, re-carving every base particle (the check's work, which ``c2np evaluate`` spreads over
its workers) and the rest of the check (comparing with the stored particles, recomputing
the fingerprint). Run it under ``PYTHONPATH=src`` and under the ``src`` of an earlier
checkout to compare versions (the store is the same file). ``--against DIR``: carve every
(material, R) base particle of the store with this version and with ``DIR/c2np/carving.py``
of an earlier checkout in turn, check that species, positions, boundary margin and clip flag
are bit-identical, and print both CPU times.

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/store_check.py STORE [--repeats 3]
[--against /tmp/prev/src]``
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any


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


def main(argv: list[str] | None = None) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
