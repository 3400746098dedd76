"""Relax the structure-type materials of the catalog and merge them into the shipped catalog.

    python reproduce/catalog/relax_structure_types.py relax --work build/typed [--only ID ...]
    python reproduce/catalog/relax_structure_types.py merge --work build/typed --out src/c2np/data/catalog

``relax`` is resumable: one ``{ID}.json`` (the provenance record) and, when built, one
``{ID}.cif`` per material in ``--work``; materials with a record are skipped. Several
processes may share ``--work``: each claims a material (``{ID}.claim``, created
exclusively) before relaxing it; delete the ``.claim`` files of an interrupted run. It runs one
torch thread per process, in an order that takes every structure type in turn (so a partial
run covers every type). ``merge`` adds the records and CIFs to a catalog folder (its
``catalog.json`` keeps the ABH3 records unchanged apart from the structure-type and
polymorph-energy fields) and sets every material's energy above the lowest polymorph.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path


def _order(ids: list[str]) -> list[str]:
    """Round robin over the structure types, smallest cells first within a type."""
    from c2np.catalog.families import typed_composition

    by_type: dict[str, list[str]] = defaultdict(list)
    for m in ids:
        by_type[typed_composition(m).structure_type].append(m)
    out: list[str] = []
    queues = [sorted(v) for _, v in sorted(by_type.items())]
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def _claim(path: Path) -> bool:
    """Create ``path`` exclusively: True for the one process that gets a material."""
    import os

    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def relax(work: Path, only: list[str] | None, *, fmax: float, log: Path | None, reverse: bool = False,
          optimizer: str = "BFGS") -> int:
    import torch

    from c2np.catalog.families import typed_material_ids
    from c2np.catalog.typed_relaxation import relax_typed_material
    from c2np.cells import write_cif
    from c2np.fileio import write_text

    torch.set_num_threads(1)
    work.mkdir(parents=True, exist_ok=True)
    ids = _order(only or typed_material_ids())
    if reverse:  # a second process from the other end shares the folder
        ids = ids[::-1]
    todo = [m for m in ids if not (work / f"{m}.json").exists()]
    print(f"{len(ids) - len(todo)} done, {len(todo)} to relax", flush=True)
    for k, mid in enumerate(todo):
        if (work / f"{mid}.json").exists() or not _claim(work / f"{mid}.claim"):
            continue  # done, or another process of the same folder has it
        t0 = time.perf_counter()
        try:
            entry, cell = relax_typed_material(mid, fmax_ev_per_angstrom=fmax, optimizer=optimizer)
        except Exception as exc:  # recorded and shown; the run goes on
            print(f"{mid}: error {type(exc).__name__}: {exc}", flush=True)
            continue
        if cell is not None:
            write_cif(cell, work / f"{mid}.cif")
        write_text(work / f"{mid}.json", json.dumps(entry.to_dict(), indent=1) + "\n")
        p = entry.prototypes[0]
        line = (f"[{k + 1}/{len(todo)}] {mid} {entry.structure_type} {entry.status} {p.n_atoms} atoms "
                f"{p.n_steps} steps {time.perf_counter() - t0:.1f} s {entry.reason}")
        print(line, flush=True)
        if log is not None:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
    return 0


def merge(work: Path, out: Path) -> int:
    from c2np.catalog.build import _catalog_document
    from c2np.catalog.records import CatalogEntry, parse_catalog_document
    from c2np.catalog.typed_relaxation import with_polymorph_energies
    from c2np.fileio import write_text

    doc = parse_catalog_document((out / "catalog.json").read_text(encoding="utf-8"), source=str(out / "catalog.json"))
    entries = {r["material_id"]: CatalogEntry.from_dict(r) for r in doc["materials"] + doc["failures"]}
    for path in sorted(work.glob("*.json")):
        entry = CatalogEntry.from_dict(json.loads(path.read_text(encoding="utf-8")))
        entries[entry.material_id] = entry
        cif = work / f"{entry.material_id}.cif"
        if entry.status == "ok":
            write_text(out / cif.name, cif.read_text(encoding="utf-8"))
    merged = with_polymorph_energies(entries.values())
    from c2np.catalog.families import typed_material_ids
    from c2np.catalog.hydrides import material_ids

    new = _catalog_document(merged, potential=doc["potential"], fmax=doc["fmax_ev_per_angstrom"],
                            started=doc["build_started_utc"], expected=material_ids() + typed_material_ids())
    write_text(out / "catalog.json", json.dumps(new, indent=1) + "\n")
    print(f"{new['n_materials']} materials, {new['n_failures']} failures, {new['n_not_built']} not built")
    return 0


def summary(work: Path) -> int:
    """Markdown tables of the relaxation records in ``work``: per structure type the materials
    tried, built and refused (with reasons), steps, time, residuals and polymorph energies."""
    from c2np.catalog.families import typed_composition, typed_material_ids
    from c2np.catalog.records import CatalogEntry
    from c2np.catalog.shipped import catalog_entries

    above = {e.material_id: e.energy_above_polymorph_ev_per_atom for e in catalog_entries()}
    recs = [CatalogEntry.from_dict(json.loads(p.read_text(encoding="utf-8"))) for p in sorted(work.glob("*.json"))]
    by_type: dict[str, list[CatalogEntry]] = defaultdict(list)
    for e in recs:
        by_type[e.structure_type or "?"].append(e)
    planned: dict[str, int] = defaultdict(int)
    for m in typed_material_ids():
        planned[typed_composition(m).structure_type] += 1
    print("| type | planned | relaxed | built | refused | steps (median, max) | time (s, median) | "
          "max force (eV/Å) | max stress (GPa) | volume ratio (min-max) | above polymorph > 0 (meV/atom, median) |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---|---|")
    for t in sorted(planned):
        es = by_type.get(t, [])
        ok = [e for e in es if e.status == "ok"]
        steps = sorted(e.prototypes[0].n_steps for e in es)
        times = sorted(e.prototypes[0].time_s for e in es)
        vols = [e.prototypes[0].volume_ratio for e in es if e.prototypes[0].volume_ratio is not None]
        pos = sorted(1000 * above[e.material_id] for e in ok if above.get(e.material_id))
        print(f"| {t} | {planned[t]} | {len(es)} | {len(ok)} | {len(es) - len(ok)} | "
              f"{steps[len(steps) // 2] if steps else '-'}, {max(steps) if steps else '-'} | "
              f"{times[len(times) // 2]:.0f} | " if times else "- | ", end="")
        print(f"{max((e.max_force_ev_per_angstrom or 0) for e in ok):.4f} | "
              f"{max((e.max_stress_gpa or 0) for e in ok):.3f} | " if ok else "- | - | ", end="")
        print(f"{min(vols):.2f}-{max(vols):.2f} | " if vols else "- | ", end="")
        print(f"{len(pos)} ({pos[len(pos) // 2]:.0f}) |" if pos else "0 |")
    refused = [e for e in recs if e.status != "ok"]
    if refused:
        print("\nRefused:")
        for e in refused:
            print(f"- {e.material_id}: {e.reason}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("relax")
    r.add_argument("--work", type=Path, default=Path("build/typed"))
    r.add_argument("--only", nargs="*")
    r.add_argument("--fmax", type=float, default=0.01)
    r.add_argument("--optimizer", default="BFGS", help="BFGS (default: about 5x fewer steps than FIRE "
                   "to the same minimum on these cells) or FIRE.")
    r.add_argument("--log", type=Path)
    r.add_argument("--reverse", action="store_true", help="Take the materials in reverse order.")
    m = sub.add_parser("merge")
    m.add_argument("--work", type=Path, default=Path("build/typed"))
    m.add_argument("--out", type=Path, default=Path("src/c2np/data/catalog"))
    sm = sub.add_parser("summary")
    sm.add_argument("--work", type=Path, default=Path("build/typed"))
    args = ap.parse_args(argv)
    if args.cmd == "summary":
        return summary(args.work)
    if args.cmd == "relax":
        return relax(args.work, args.only, fmax=args.fmax, log=args.log, reverse=args.reverse,
                     optimizer=args.optimizer)
    return merge(args.work, args.out)


if __name__ == "__main__":
    sys.exit(main())
