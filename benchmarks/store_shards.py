"""Build and read throughput of a sharded store (``build --shards K``) against the single-file
store of the same recipe, as ratios (sharded / single; < 1 build time is faster).

For K in ``--shards`` (default 1, 4, 16), on ``--materials`` shipped materials (default all 82)
at ``--radii`` (default all of protocol ``paper``):
build wall time (serial and with ``--workers`` local processes), open time (a sharded open
also reads every shard's bytes for its SHA-256 and joins the shards), and the time to read
every sample's rotated particle after opening (the same arrays; the reader is the same code).
Each timing is the best of ``--repeat`` runs, taken round robin over the stores (so load from
elsewhere hits every row alike). Nothing here is asserted; it prints a table.

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/store_shards.py [--materials 82] [--json OUT]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


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


def main(argv: list[str] | None = None) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
