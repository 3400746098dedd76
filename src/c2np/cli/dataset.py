"""Commands on cells, particles and dataset stores: carve, build, info, verify, export,
import-original."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from c2np.cli._common import (
    SCHEDULER_HELP,
    console,
    err_console,
    esc,
    handle_errors,
    open_executor,
    print_json,
    resolve_workers,
)
from c2np.fileio import check_output_path

if TYPE_CHECKING:
    from c2np.store import DatasetStore


def register(app: typer.Typer) -> None:
    """Add the dataset commands to ``app``."""
    app.command("carve")(carve_cmd)
    app.command("build")(build_cmd)
    app.command("info")(info_cmd)
    app.command("verify")(verify_cmd)
    app.command("export")(export_cmd)
    app.command("import-original")(import_original_cmd)


DEFAULT_STORE = Path("c2np_out/dataset.h5")
DEFAULT_EXPORT = Path("c2np_out/export")


def parse_radii(text: str | None) -> list[int] | None:
    """'6,10,30' or '6-30' or '6-10,29' -> sorted radii (whole Å); None stays None.

    Each radius is a plain decimal integer (no sign, no underscore: ``4_1`` is refused, not
    read as 41), at least 1 and within the limit ``radius_angstrom``; the list holds at most
    ``radii_count`` radii (checked before it is expanded)."""
    import re

    from c2np.errors import C2NPInputError
    from c2np.limits import check

    if text is None or not text.strip():
        return None
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"([0-9]+)(?:\s*-\s*([0-9]+))?", part)
        if m is None:
            raise C2NPInputError(f"--radii: cannot read {part!r}; use e.g. 6,10,30 or 6-30")
        lo = int(m[1])
        hi = int(m[2]) if m[2] is not None else lo
        if lo < 1 or hi < lo:
            raise C2NPInputError(f"--radii: {part!r} is not a range of radii >= 1 Å (low-high)")
        check("radius_angstrom", hi, what=f"--radii {part}")
        check("radii_count", len(out) + hi - lo + 1, what="--radii")
        out.update(range(lo, hi + 1))
    return sorted(out)


def load_cells(cifs: Path | None, materials: str | None, protocol: str = "paper") -> list:
    """Cells from --cifs (folder/zip) or the shipped catalog (the protocol's scope: the 82
    ABH3 perovskites for paper and strict, every material for strict-structure; any shipped
    material by --materials), filtered by --materials."""
    from c2np.errors import C2NPInputError

    if cifs is not None:
        from c2np.cells import read_cells

        cells = read_cells(cifs)
    else:
        from c2np.catalog import load_catalog
        from c2np.splits import get_protocol

        cells = load_catalog("all" if materials else get_protocol(protocol).catalog_scope)
    if materials:
        wanted = [m.strip() for m in materials.split(",") if m.strip()]
        by_id = {c.material_id: c for c in cells}
        unknown = [m for m in wanted if m not in by_id]
        if unknown:
            raise C2NPInputError(f"--materials: unknown material(s) {unknown}; "
                                 f"known: {', '.join(sorted(by_id)[:12])}{' ...' if len(by_id) > 12 else ''}")
        cells = [by_id[m] for m in wanted]
    return cells


@handle_errors
def build_cmd(
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Store file to write (HDF5; default "
                                       "c2np_out/dataset.h5); with --shards the manifest NAME.json or a "
                                       "folder (default c2np_out/dataset.json)."),
    cifs: Optional[Path] = typer.Option(None, "--cifs", help="Folder or .zip of CIFs (default: the shipped catalog)."),
    protocol: str = typer.Option("paper", "--protocol", "-p", help="paper, strict or strict-structure."),
    materials: Optional[str] = typer.Option(None, "--materials", help="Comma-separated material ids."),
    radii: Optional[str] = typer.Option(None, "--radii", help="Subset of radii, e.g. 6,10,30 or 6-30."),
    centre: tuple[float, float, float] = typer.Option((0.0, 0.0, 0.0), "--centre", help="Carving centre (fractional)."),
    json_out: bool = typer.Option(False, "--json", help="Print the store summary as JSON."),
    workers: int = typer.Option(1, "--workers", help="Processes carving base particles in parallel "
                                "(0: one per available CPU). The store does not depend on it."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Carve on Dask instead: local:N "
                                            "or tcp://HOST:PORT (needs c2np\\[dask])."),
    shards: Optional[int] = typer.Option(None, "--shards", help="Write K HDF5 shards (whole materials "
                                         "each, of about equal size) and a JSON manifest, carved by K "
                                         "tasks; every reader opens the manifest or its folder."),
) -> None:
    """Build a dataset store: recipes plus every (material, R) base particle."""
    from c2np.errors import C2NPInputError
    from c2np.executor import make_executor, parse_scheduler
    from c2np.limits import check as check_limit
    from c2np.store import DatasetStore, build_store

    if shards is None:
        out = DEFAULT_STORE if out is None else out
        check_output_path(out)  # fail before the work, not after it
    else:
        from c2np.store.manifest import manifest_path_for

        if shards < 1:
            raise C2NPInputError(f"--shards {shards}: give K >= 1")
        check_limit("store_shards", shards, what="--shards")
        out = manifest_path_for(DEFAULT_STORE.with_suffix(".json") if out is None else out)
        check_output_path(out)
    parse_scheduler(scheduler)
    n_workers = resolve_workers(workers)
    cells = load_cells(cifs, materials, protocol)
    with make_executor(n_workers, scheduler) as ex:
        path = build_store(cells, out, protocol, radii_angstrom=parse_radii(radii), centre_frac=centre,
                           progress=not json_out, executor=ex, shards=shards)
    opened = DatasetStore.open(path)
    info = opened.info()
    radii_line, warning = radii_report(opened.recipes)
    if json_out:
        print_json({**info, "radii": radii_line, **({"warning": warning} if warning else {})})
    else:
        _print_info(info)
        for line in radii_line.splitlines():  # one terminal line each, never wrapped
            console().print(esc(line), highlight=False, soft_wrap=True)
    if warning:
        err_console().print(f"[yellow]warning:[/] {esc(warning)}", highlight=False, soft_wrap=True)


def radii_report(recipes: Any) -> tuple[str, str | None]:
    """The lines naming a store's training, validation, ID and OOD radii (and held-out
    materials; the whole protocol's too when the store has a subset of its radii), and a
    warning when it has no training rows (None when it has)."""
    import numpy as np

    from c2np.splits import describe_radii, get_protocol, no_training_rows_message
    from c2np.tasks import example_rows

    proto = get_protocol(recipes.protocol)
    radii = np.unique(recipes.radius_angstrom).tolist()
    held = len(recipes.heldout_materials)
    line = "store radii, " + describe_radii(proto, radii, n_heldout_materials=held)
    if sorted(radii) != sorted(proto.radii_angstrom):
        line += "\nall radii of the " + describe_radii(proto)
    warning = None
    if len(recipes) and not len(example_rows(recipes, "train")):
        warning = no_training_rows_message(proto, radii, n_materials=len(recipes.materials),
                                           n_heldout_materials=held) + "; c2np train cannot use it"
    return line, warning


def _print_info(info: dict) -> None:
    from rich.table import Table

    con = console()
    con.print(f"[bold]{esc(info['path'])}[/]  protocol={esc(info['protocol'])}  source={esc(info['source'])}  "
              f"{info['n_materials']} materials, {info['n_samples']} samples, "
              f"{info['file_bytes'] / 1e6:.2f} MB")
    con.print(f"fingerprint {info['fingerprint']}")
    if info.get("n_shards"):
        con.print(f"{info['n_shards']} shards: " + ", ".join(
            f"{esc(s['file'])} ({s['n_samples']} samples, {s['n_materials']} materials)" for s in info["shards"][:4])
            + (" ..." if info["n_shards"] > 4 else ""))
    t = Table(title="samples per split")
    for s in info["per_split"]:
        t.add_column(s, justify="right")
    t.add_row(*[str(v) for v in info["per_split"].values()])
    con.print(t)
    seps = info.get("summary", {}).get("min_separation_deg", {})
    if seps:
        def smallest(tag: str) -> str:
            vals = [v for k, v in seps.items() if k.endswith(tag) and k != "train_within"]
            return f"{min(vals):.2f}°" if vals else "–"

        mod = " (modulo site symmetry)" if info["summary"].get("modulo_symmetry") else ""
        con.print(f"min separations{mod}: train grid {seps.get('train_within', float('nan')):.2f}°, "
                  f"within ID/OOD sets {smallest('_within')}, ID/OOD to train {smallest('_to_train')}")
    if info["n_supercell_clipped"]:
        con.print(f"[yellow]note:[/] {info['n_supercell_clipped']} base particles would be clipped by "
                  "the paper's 20x20x20 supercell")


@handle_errors
def info_cmd(
    store: Path = typer.Argument(DEFAULT_STORE, help="Store file."),
    recipes: bool = typer.Option(False, "--recipes", help="List every recipe (with --json)."),
    split: Optional[str] = typer.Option(None, "--split", help="Only this split (with --recipes)."),
    json_out: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Sizes per split and radius, provenance; ``--recipes --json`` lists every recipe."""
    from c2np.store import DatasetStore

    ds = DatasetStore.open(store)
    info = ds.info()
    if recipes:
        rows = ds.rows(split)
        data = ds.recipes.to_records(rows)
        if json_out:
            print_json({"store": str(store), "fingerprint": ds.fingerprint, "recipes": data})
        else:
            for rec in data:
                console().print(esc(f"{rec['sample_id']}  {rec['split']}  q={rec['quaternion_xyzw']}"))
        return
    if json_out:
        print_json(info)
        return
    _print_info(info)


@handle_errors
def verify_cmd(
    store: Path = typer.Argument(DEFAULT_STORE, help="Store file."),
    json_out: bool = typer.Option(False, "--json", help="JSON output."),
    workers: int = typer.Option(1, "--workers", help="Processes re-carving base particles "
                                "(0: one per available CPU). The report does not depend on it."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
) -> None:
    """Re-carve every base particle, check it against the store, recompute the fingerprint.
    Exit 0 when everything matches, 1 on a mismatch, 2 on an unreadable store."""
    from c2np.store import verify_store

    with open_executor(workers, scheduler) as ex:
        report = verify_store(store, progress=not json_out, executor=ex)
    if json_out:
        print_json(report.to_dict())
    else:
        con = console()
        status = "[bold green]OK[/]" if report.ok else "[bold red]MISMATCH[/]"
        con.print(f"{status}  {report.n_base_checked} base particles re-carved, max position error "
                  f"{report.max_position_error_angstrom:.2e} Å")
        con.print(f"fingerprint stored     {report.fingerprint_stored}")
        con.print(f"fingerprint recomputed {report.fingerprint_recomputed}")
        for line in report.problems:
            con.print(f"[red]-[/] {esc(line)}")
    if not report.ok:
        raise typer.Exit(1)


@handle_errors
def export_cmd(
    store: Path = typer.Argument(DEFAULT_STORE, help="Store file."),
    fmt: str = typer.Option("extxyz", "--format", "-f", help="extxyz, original, parquet or asedb."),
    out: Path = typer.Option(DEFAULT_EXPORT, "-o", "--out",
                             help="Output folder (asedb: the database file, default c2np_out/export.db)."),
    split: Optional[str] = typer.Option(None, "--split", help="extxyz: only these splits. parquet, asedb: "
                                        "also write the particles of these splits whole (comma-separated, "
                                        "e.g. train,val)."),
    rotations_per_group: Optional[int] = typer.Option(
        None, "--rotations-per-group", min=1, help="parquet: materialise only this many rotations per "
                                                   "(material, R) of train / val."),
    license_id: str = typer.Option("mit", "--license", help="parquet: the licence the dataset card names."),
    workers: int = typer.Option(1, "--workers", help="Processes formatting samples "
                                "(0: one per available CPU). The files do not depend on it."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
) -> None:
    """Export a store: extxyz (one file per split), the original folder layout, Parquet tables
    with a dataset card (recipes, base particles, cells; docs/howto/load-data.md) or an ASE
    database. train / val hold only the rows a model may learn from."""
    from c2np.errors import C2NPInputError
    from c2np.store import DatasetStore

    formats = ("extxyz", "original", "parquet", "asedb")
    if fmt not in formats:
        raise C2NPInputError(f"--format: unknown format {fmt!r}; choose one of {', '.join(formats)}")
    if fmt == "asedb" and out == DEFAULT_EXPORT:
        out = out.with_suffix(".db")
    check_output_path(out, kind="file" if fmt == "asedb" else "folder")
    splits = [s.strip() for s in split.split(",") if s.strip()] if split else []
    ds = DatasetStore.open(store)
    if fmt in ("parquet", "asedb"):
        _export_tables(ds, fmt, out, splits, rotations_per_group, license_id)
        return
    from c2np.formats import export_extxyz, export_original

    with open_executor(workers, scheduler) as ex:
        if fmt == "extxyz":
            paths = export_extxyz(ds, out, splits=splits or None, executor=ex)
            console().print("wrote " + ", ".join(esc(p) for p in paths))
        else:
            path = export_original(ds, out, executor=ex)
            console().print(f"wrote {esc(path)}/quaternions/... and {esc(path)}/cifs/")


def _export_tables(ds: DatasetStore, fmt: str, out: Path, splits: list[str], rotations_per_group: Optional[int],
                   license_id: str) -> None:
    """``export --format parquet`` / ``asedb``."""
    if fmt == "parquet":
        from c2np.parquet_export import export_parquet

        paths = export_parquet(ds, out, materialise=splits,
                               rotations_per_group=rotations_per_group, license_id=license_id)
        console().print("wrote " + ", ".join(esc(p) for p in paths))
    else:
        from c2np.formats import export_asedb

        console().print(f"wrote {esc(export_asedb(ds, out, splits=splits))}")


@handle_errors
def import_original_cmd(
    path: Path = typer.Argument(..., help="Original raw archive folder (cifs/, materials/)."),
    out: Path = typer.Option(DEFAULT_STORE, "-o", "--out", help="Store file to write."),
    json_out: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Build a store from the original archive's pre-carved particles."""
    check_output_path(out)
    import json as _json

    from c2np.formats import import_original
    from c2np.store import DatasetStore

    p = import_original(path, out, progress=not json_out)
    ds = DatasetStore.open(p)
    report = _json.loads(ds.attrs.get("import_report", "[]"))
    info = ds.info()
    info["import_report"] = report
    if json_out:
        print_json(info)
        return
    _print_info(info)
    bad = [r for r in report if r["matched_within_0.01A"] < 1.0 or r["n_atoms_original"] != r["n_atoms_carved"]]
    console().print(f"{len(report) - len(bad)} of {len(report)} imported particles agree with c2np's carve")
    for r in bad[:10]:
        console().print(f"[yellow]-[/] {esc(r['material'])} R={r['radius_angstrom']}: {r['n_atoms_original']} atoms "
                        f"vs {r['n_atoms_carved']} carved, {100 * r['matched_within_0.01A']:.1f} % matched")


@handle_errors
def carve_cmd(
    cell_path: Path = typer.Argument(..., help="Unit cell (CIF)."),
    radius: float = typer.Option(..., "--radius", "-r", help="Sphere radius in Å."),
    centre: tuple[float, float, float] = typer.Option((0.0, 0.0, 0.0), "--centre",
                                                      help="Centre in fractional coordinates."),
    quat: Optional[tuple[float, float, float, float]] = typer.Option(
        None, "--quat", help="Rotation as a scalar-last unit quaternion X Y Z W."),
    out: Path = typer.Option(..., "-o", "--out", help="Output .extxyz (positions in the centred frame)."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary instead of text."),
) -> None:
    """Carve a spherical particle of radius R from a unit cell."""
    check_output_path(out)
    from c2np.carving import carve
    from c2np.cells import read_cif
    from c2np.particle_io import write_extxyz

    cell = read_cif(cell_path)
    res = carve(cell, radius, centre_frac=centre, quaternion=quat)
    info = {"material": cell.material_id, "radius_angstrom": res.radius_angstrom,
            "centre_frac": res.centre_frac, "quaternion_xyzw": res.quaternion,
            "boundary_margin_angstrom": res.boundary_margin_angstrom}
    write_extxyz(out, [(res.particle, info)])
    summary = {"file": str(out), "material": cell.material_id, "n_atoms": res.particle.n_atoms,
               "radius_angstrom": res.radius_angstrom,
               "boundary_margin_angstrom": res.boundary_margin_angstrom,
               "paper_supercell_clips": res.paper_supercell_clips}
    if json_out:
        print_json(summary)
        return
    con = console()
    con.print(f"carved [bold]{res.particle.n_atoms}[/] atoms of {esc(cell.material_id)} "
              f"(R = {res.radius_angstrom:g} Å) -> {esc(out)}")
    if res.boundary_margin_angstrom < 1e-3:
        con.print(f"[yellow]warning:[/] a lattice shell lies {res.boundary_margin_angstrom:.2e} Å "
                  "from the sphere: the atom count is tolerance-sensitive")
    if res.paper_supercell_clips:
        con.print("[yellow]note:[/] the paper's 20x20x20 supercell would clip this sphere")
