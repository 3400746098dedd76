"""Catalog build time per material and prototype, and optimizer comparison.

Reads the per-prototype timings that ``build_catalog`` records in ``catalog.json`` (the
shipped one by default) and prints them as tables: per material, per prototype (mean,
median, max time, steps, time per step) and the total against the issue's budget of 60
minutes on 2 cores. With ``--rebuild IDS`` it also re-relaxes those materials now, with
FIRE (the catalog's optimizer) and with BFGS (the reference), and reports the time ratio
and the energy difference of the chosen structure.

    python reproduce/catalog/build_times.py [--catalog PATH] [--rebuild KMgH3,NaMgH3] [--plot x.png]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def _load(path: Path | None) -> dict:
    if path is None:
        from c2np.catalog import catalog_data_dir

        return json.loads((catalog_data_dir() / "catalog.json").read_text(encoding="utf-8"))
    return json.loads(Path(path).read_text(encoding="utf-8"))


def per_material_table(doc: dict) -> float:
    """Print one line per material; returns the summed build time (s)."""
    from c2np.catalog import PROTOTYPES

    records = sorted(doc["materials"] + doc["failures"], key=lambda r: r["material_id"])
    head = f"{'material':10s} {'status':7s} {'chosen':7s} " + " ".join(f"{p:>14s}" for p in PROTOTYPES)
    print(head + f" {'total s':>8s}")
    print("-" * len(head + " total s  "))
    total = 0.0
    for rec in records:
        by = {p["prototype"]: p for p in rec["prototypes"]}
        cells = []
        for name in PROTOTYPES:
            p = by.get(name)
            cells.append("-".rjust(14) if p is None else f"{p['time_s']:6.1f}s/{p['n_steps']:4d}st"
                         + ("" if p["status"] == "ok" else "!"))
        total += rec["time_s"]
        print(f"{rec['material_id']:10s} {rec['status']:7s} {str(rec['chosen_prototype']):7s} "
              + " ".join(f"{c:>14s}" for c in cells) + f" {rec['time_s']:8.1f}")
    print("(time s / FIRE steps per prototype; ! = rejected or error)")
    return total


def per_prototype_table(doc: dict) -> None:
    """Print time statistics per prototype over all materials."""
    from c2np.catalog import PROTOTYPES

    records = doc["materials"] + doc["failures"]
    print(f"\n{'prototype':9s} {'atoms':>5s} {'n':>4s} {'mean s':>7s} {'median s':>9s} {'max s':>7s} "
          f"{'mean steps':>10s} {'ms/step':>8s} {'ok':>4s}")
    for name in PROTOTYPES:
        rs = [p for r in records for p in r["prototypes"] if p["prototype"] == name]
        if not rs:
            continue
        t = [p["time_s"] for p in rs]
        steps = [p["n_steps"] for p in rs]
        ms_per_step = 1000 * sum(t) / max(1, sum(steps))
        print(f"{name:9s} {rs[0]['n_atoms']:5d} {len(rs):4d} {statistics.mean(t):7.2f} "
              f"{statistics.median(t):9.2f} {max(t):7.1f} {statistics.mean(steps):10.1f} "
              f"{ms_per_step:8.1f} {sum(p['status'] == 'ok' for p in rs):4d}")


def rebuild(ids: list[str], threads: int) -> None:
    """Re-relax ``ids`` now with FIRE and BFGS; print times and ratios."""
    import torch

    from c2np.catalog import load_potential, relax_material

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    load_potential("chgnet")
    print(f"\npotential load: {time.perf_counter() - t0:.2f} s (once per process)")
    print(f"{'material':10s} {'FIRE s':>8s} {'BFGS s':>8s} {'BFGS/FIRE':>10s} {'chosen F/B':>16s} "
          f"{'dE meV/atom':>12s}")
    for mid in ids:
        res = {}
        for opt in ("FIRE", "BFGS"):
            t = time.perf_counter()
            entry, _ = relax_material(mid, optimizer=opt)
            res[opt] = (time.perf_counter() - t, entry)
        (tf, ef), (tb, eb) = res["FIRE"], res["BFGS"]
        de = (None if ef.energy_per_atom_ev is None or eb.energy_per_atom_ev is None
              else 1000 * (eb.energy_per_atom_ev - ef.energy_per_atom_ev))
        print(f"{mid:10s} {tf:8.1f} {tb:8.1f} {tb / tf:10.2f} "
              f"{str(ef.chosen_prototype) + '/' + str(eb.chosen_prototype):>16s} "
              f"{'-' if de is None else format(de, '+.3f'):>12s}")


#: Experimental lattice parameters (Å) at room temperature, conventional setting as spglib
#: standardizes it (Pnma: a, b, c with b the long axis). Sources in docs/catalog.md.
LITERATURE: dict[str, tuple[int, tuple[float, float, float], str]] = {
    "KMgH3": (221, (4.023, 4.023, 4.023), "Schumacher & Weiss 1990"),
    "NaMgH3": (62, (5.463, 7.703, 5.411), "Rönnebro et al. 2000"),
    "SrLiH3": (221, (3.833, 3.833, 3.833), "Messer et al. 1964"),
    "BaLiH3": (221, (4.023, 4.023, 4.023), "J. Chem. Phys. 48, 4660 (1968)"),
    "CsCaH3": (221, (4.617, 4.617, 4.617), "Gingl et al. 1999"),
}


def _pseudocubic_angstrom(a: float, b: float, c: float, sg: int) -> float:
    """Cube root of the volume per ABH3 formula unit of a conventional cell."""
    z = {221: 1, 62: 4, 140: 4, 167: 6}.get(sg)
    if z is None:
        raise ValueError(f"no formula-unit count for space group {sg}")
    return (a * b * c / z) ** (1 / 3)  # orthogonal axes for 221/62/140; 167 corrected below


def literature_table(doc: dict) -> None:
    """Markdown table: relaxed conventional lattice parameters beside experiment, and the
    pseudo-cubic constant (V per formula unit)^(1/3) for settings that differ."""
    import math

    by = {m["material_id"]: m for m in doc["materials"]}
    print("\n| material | SG exp. | SG CHGNet | a, b, c exp. (Å) | a, b, c CHGNet (Å) | rel. diff. (%) "
          "| a_pc exp. / CHGNet (Å) | a_pc diff. (%) | source |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mid, (sg, abc, src) in LITERATURE.items():
        m = by.get(mid)
        if m is None:
            print(f"| {mid} | {sg} | not built | {', '.join(f'{x:.3f}' for x in abc)} | - | - | - | - | {src} |")
            continue
        lp = m["lattice_parameters"]
        got = (lp["a"], lp["b"], lp["c"])
        sg_got = m["spacegroup_symprec_1e_3"]
        rel = ", ".join(f"{100 * (g - e) / e:+.1f}" for g, e in zip(got, abc)) if sg_got == sg else "other setting"
        apc_exp = _pseudocubic_angstrom(*abc, sg)
        apc_got = _pseudocubic_angstrom(*got, sg_got)
        if sg_got == 167:  # hexagonal axes: V = a^2 c sin(120)
            apc_got = (got[0] * got[1] * got[2] * math.sin(math.radians(120)) / 6) ** (1 / 3)
        print(f"| {mid} | {sg} | {sg_got} | {', '.join(f'{x:.3f}' for x in abc)} | "
              f"{', '.join(f'{x:.3f}' for x in got)} | {rel} | {apc_exp:.3f} / {apc_got:.3f} | "
              f"{100 * (apc_got - apc_exp) / apc_exp:+.1f} | {src} |")


def spacegroup_table(doc: dict) -> None:
    """Markdown table of the space-group distribution at both tolerances."""
    from collections import Counter

    tight = Counter((m["spacegroup_symprec_1e_3"], m["international_symprec_1e_3"]) for m in doc["materials"])
    loose = Counter(m["spacegroup_symprec_1e_1"] for m in doc["materials"])
    print("\n| space group | materials (symprec 1e-3 Å) | materials (symprec 1e-1 Å) | ids |")
    print("|---|---|---|---|")
    for (sg, sym), n in sorted(tight.items(), key=lambda kv: -kv[0][0]):
        ids = ", ".join(m["material_id"] for m in doc["materials"] if m["spacegroup_symprec_1e_3"] == sg)
        print(f"| {sg} {sym} | {n} | {loose.get(sg, 0)} | {ids} |")
    extra = {sg: n for sg, n in loose.items() if sg not in {k[0] for k in tight}}
    for sg, n in extra.items():
        print(f"| {sg} | 0 | {n} | |")
    chosen = Counter(m["chosen_prototype"] for m in doc["materials"])
    print("\nchosen prototype: " + ", ".join(f"{k} {v}" for k, v in sorted(chosen.items())))


def plot(doc: dict, out: Path) -> None:
    """Two panels: relaxation time per prototype (box plot) and the space-group counts."""
    import os
    from collections import Counter

    os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp())
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from c2np.catalog import PROTOTYPES

    records = doc["materials"] + doc["failures"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    data = [[p["time_s"] for r in records for p in r["prototypes"] if p["prototype"] == n] for n in PROTOTYPES]
    ax1.boxplot(data, tick_labels=list(PROTOTYPES))
    ax1.set_ylabel("relaxation time (s)")
    ax1.set_title("CHGNet relaxation time per prototype")
    counts = Counter(f"{m['spacegroup_symprec_1e_3']} {m['international_symprec_1e_3']}" for m in doc["materials"])
    labels = sorted(counts, key=lambda k: -int(k.split()[0]))
    ax2.bar(labels, [counts[k] for k in labels])
    ax2.set_ylabel("materials")
    ax2.set_title("space groups of the catalog (symprec 1e-3 Å)")
    ax2.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    print(f"plot -> {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--catalog", type=Path, default=None, help="catalog.json (default: the shipped one)")
    ap.add_argument("--rebuild", default="", help="comma-separated ids to re-relax now (FIRE vs BFGS)")
    ap.add_argument("--plot", type=Path, default=None, help="write a PNG of times and space groups")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for --rebuild")
    args = ap.parse_args()
    doc = _load(args.catalog)
    total = per_material_table(doc)
    per_prototype_table(doc)
    n = len(doc["materials"]) + len(doc["failures"])
    print(f"\nmaterials: {n} ({doc['n_materials']} built, {doc['n_failures']} failed, "
          f"{doc.get('n_not_built', 0)} not built); summed relaxation time {total / 60:.1f} min; "
          f"{total / max(n, 1):.1f} s per material; budget 60 min -> ratio {total / 3600:.2f}")
    literature_table(doc)
    spacegroup_table(doc)
    if args.plot is not None:
        plot(doc, args.plot)
    if args.rebuild:
        with tempfile.TemporaryDirectory():
            rebuild([s.strip() for s in args.rebuild.split(",") if s.strip()], args.threads)


if __name__ == "__main__":
    main()
