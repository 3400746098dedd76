"""What one ``c2np evaluate`` pays before scoring: opening the store and its check (issue 15).

Times, in this process (one thread, CPU seconds, median of ``--repeats``): opening the
store, re-carving every base particle (the check's work, which ``c2np evaluate`` spreads over
its workers) and the rest of the check (comparing with the stored particles, recomputing
the fingerprint). Run it under ``PYTHONPATH=src`` and under the ``src`` of an earlier
checkout to compare versions (the store is the same file).

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/store_check.py STORE [--repeats 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    import c2np.store as st

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
