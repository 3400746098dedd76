"""Training rows of the loaders against the store's raw split, and the Parquet export's size
and cost, on the shipped catalog.

* ``strict`` store of the first ``--strict-materials`` catalog materials: rows of the raw
  ``train`` split versus ``c2np.loaders.loader_rows(train)``, and how many belong to held-out
  materials;
* ``paper`` store of the whole catalog: Parquet export (bytes per file, seconds), read back and
  checked (``ParquetExport.check``: re-carve and fingerprint).

    python benchmarks/loaders_export.py [--strict-materials 10] [--out loaders_export.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict-materials", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None, help="Also write the numbers as JSON here.")
    args = ap.parse_args()

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


if __name__ == "__main__":
    main()
