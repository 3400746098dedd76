"""Commands on the material catalog: ``c2np catalog list | show | build``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from c2np.cli._common import console, esc, handle_errors, print_json, resolve_workers


def register(app: typer.Typer) -> None:
    """Add the ``catalog`` command group to ``app``."""
    group = typer.Typer(name="catalog", no_args_is_help=True,
                        help="The shipped hydride catalog (perovskites and related structure "
                             "types): list, show, rebuild.")
    group.command("list")(list_cmd)
    group.command("show")(show_cmd)
    group.command("build")(build_cmd)
    group.command("merge")(merge_cmd)
    app.add_typer(group, name="catalog")


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _provenance(e: Any) -> dict[str, Any]:
    """How a material was made: potential, settings and residuals of its relaxation."""
    return {"potential": e.potential_version, "fmax_ev_per_angstrom": e.fmax_ev_per_angstrom,
            "optimizer": e.optimizer, "max_force_ev_per_angstrom": e.max_force_ev_per_angstrom,
            "max_stress_gpa": e.max_stress_gpa, "symmetry_library": e.symmetry_library}


@handle_errors
def list_cmd(
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    structure_type: Optional[str] = typer.Option(None, "--structure-type", help="Only materials of "
                                                 "these structure types (comma-separated, e.g. 2H,RP1,"
                                                 "perovskite-Pnma)."),
) -> None:
    """List the shipped catalog materials (and the compositions left out, with reasons)."""
    from rich.table import Table

    from c2np.catalog import catalog_entries, catalog_failures
    from c2np.errors import C2NPInputError

    entries = catalog_entries()
    failures = catalog_failures()
    if structure_type is not None:
        wanted = [t.strip() for t in structure_type.split(",") if t.strip()]
        known = sorted({e.structure_type_name for e in entries})
        unknown = [t for t in wanted if t not in known]
        if unknown or not wanted:
            raise C2NPInputError(f"--structure-type: unknown structure type(s) {unknown or [structure_type]}; "
                                 f"shipped: {', '.join(known)}")
        entries = [e for e in entries if e.structure_type_name in wanted]
        failures = []
    if json_out:
        print_json({"materials": [
            {"material_id": e.material_id, "formula": e.formula, "structure_type": e.structure_type_name,
             "prototype_compound": e.prototype_compound or "CaTiO3 (perovskite)",
             "chosen_prototype": e.chosen_prototype,
             "spacegroup_symprec_1e_3": e.spacegroup_symprec_1e_3,
             "spacegroup_symprec_1e_1": e.spacegroup_symprec_1e_1,
             "international": e.international_symprec_1e_3,
             "lattice_parameters": e.lattice_parameters, "energy_per_atom_ev": e.energy_per_atom_ev,
             "energy_above_polymorph_ev_per_atom": e.energy_above_polymorph_ev_per_atom,
             "provenance": _provenance(e)}
            for e in entries],
            "left_out": [{"material_id": f["material_id"], "reason": f["reason"]} for f in failures]})
        return
    table = Table(title=f"c2np catalog: {len(entries)} materials")
    table.caption = "SG: space group at symprec 1e-3 Å (1e-1 Å); a, b, c: conventional cell (Å); E: eV/atom"
    for col in ("id", "type", "SG", "SG 0.1", "a", "b", "c", "E"):
        table.add_column(col, justify="left" if col in ("id", "type", "SG") else "right", no_wrap=True)
    for e in entries:
        lp = e.lattice_parameters or {}
        table.add_row(e.material_id, e.structure_type_name,
                      f"{e.spacegroup_symprec_1e_3} {e.international_symprec_1e_3}",
                      str(e.spacegroup_symprec_1e_1), _fmt(lp.get("a"), ".4f"), _fmt(lp.get("b"), ".4f"),
                      _fmt(lp.get("c"), ".4f"), _fmt(e.energy_per_atom_ev, ".4f"))
    con = console()
    con.print(table)
    if failures:
        con.print(f"[yellow]{len(failures)} compositions left out:[/]")
        for f in failures:
            con.print(f"  {esc(f['material_id'])}: {esc(f['reason'])}", highlight=False)


@handle_errors
def show_cmd(
    material_id: str = typer.Argument(..., help="Material id, e.g. KMgH3."),
    json_out: bool = typer.Option(False, "--json", help="Print the full provenance record as JSON."),
) -> None:
    """Show one catalog material: provenance record and relaxed cell."""
    from c2np.catalog import catalog_entries, get_cell

    cell = get_cell(material_id)  # unknown id -> C2NPInputError -> exit 2
    entry = next(e for e in catalog_entries() if e.material_id == material_id)
    if json_out:
        data = entry.to_dict()
        data["structure_type"] = entry.structure_type_name
        data["cell"] = cell.to_dict()
        print_json(data)
        return
    con = console()
    lp = entry.lattice_parameters or {}
    proto = entry.prototype_compound or f"CaTiO3 (perovskite, {entry.chosen_prototype} tilt variant)"
    con.print(f"structure type {esc(entry.structure_type_name)}, prototype {esc(proto)}", highlight=False)
    if entry.energy_above_polymorph_ev_per_atom is not None:
        con.print(f"energy above the lowest polymorph of {esc(entry.formula)} in the catalog: "
                  f"{1000 * entry.energy_above_polymorph_ev_per_atom:.1f} meV/atom", highlight=False)
    con.print(f"[bold]{esc(entry.material_id)}[/]  relaxed from {entry.chosen_prototype}, space group "
              f"{entry.spacegroup_symprec_1e_3} ({entry.international_symprec_1e_3}) at symprec 1e-3 Å, "
              f"{entry.spacegroup_symprec_1e_1} at 1e-1 Å", highlight=False)
    con.print("conventional cell: " + ", ".join(f"{k} = {v:.4f}" for k, v in lp.items()), highlight=False)
    con.print(f"energy {entry.energy_per_atom_ev:.5f} eV/atom, residual force "
              f"{entry.max_force_ev_per_angstrom:.2e} eV/Å, residual stress {entry.max_stress_gpa:.2e} GPa, "
              f"shortest distance {entry.shortest_distance_angstrom:.3f} Å", highlight=False)
    con.print(f"potential {esc(entry.potential_version)}; fmax {entry.fmax_ev_per_angstrom} eV/Å, "
              f"{entry.optimizer}, {entry.symmetry_library}", highlight=False)
    con.print("prototypes:")
    for p in entry.prototypes:
        e = "-" if p.energy_per_atom_ev is None else f"{p.energy_per_atom_ev:.5f} eV/atom"
        con.print(f"  {p.prototype:7s} {p.status:8s} {e}  SG {p.spacegroup_symprec_1e_3}  "
                  f"{p.n_steps} steps  {p.time_s:.1f} s  {esc(p.reason)}", highlight=False)


@handle_errors
def build_cmd(
    potential: str = typer.Option("chgnet", "--potential", help="chgnet (default) or sevenn."),
    only: Optional[str] = typer.Option(None, "--only", help="Comma-separated material ids (default: all 82)."),
    out: Path = typer.Option(Path("catalog"), "--out", help="Output folder (CIFs + catalog.json); "
                             "an interrupted build resumes there."),
    fmax: float = typer.Option(0.01, "--fmax", help="Force tolerance in eV/Å."),
    workers: int = typer.Option(1, "--workers", help="Materials relaxed at once, one process "
                                "each (0: one per available CPU)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Relax on Dask instead: local:N or "
                                            "tcp://HOST:PORT (needs c2np\\[dask]; the workers must see --out, "
                                            "e.g. on a shared file system). The catalog does not depend on it."),
    shard: Optional[str] = typer.Option(None, "--shard", help="Relax only shard I of N of the materials "
                                        "(every N-th, I = 0..N-1, e.g. a job-array index) into --out; "
                                        "c2np catalog merge combines the N folders."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Relax the catalog compositions with a universal potential (resumable)."""
    from c2np.catalog import build_catalog
    from c2np.executor import make_executor, parse_scheduler
    from c2np.sharding import parse_shard

    parse_scheduler(scheduler)
    shard_spec = parse_shard(shard) if shard is not None else None
    n_workers = resolve_workers(workers)
    ids = None if only is None else [s.strip() for s in only.split(",") if s.strip()]
    if scheduler is None:
        entries = build_catalog(out, potential=potential, only=ids, fmax=fmax, progress=True, workers=n_workers,
                                shard=shard_spec)
    else:
        with make_executor(n_workers, scheduler) as ex:
            entries = build_catalog(out, potential=potential, only=ids, fmax=fmax, progress=True,
                                    workers=n_workers, executor=ex, shard=shard_spec)
    _report(out, entries, json_out)


@handle_errors
def merge_cmd(
    parts: list[Path] = typer.Argument(..., help="Folders of c2np catalog build --shard I/N."),
    out: Path = typer.Option(..., "-o", "--out", help="Merged catalog folder (absent or empty)."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Combine the shard folders of one catalog build into the catalog that one build writes."""
    from c2np.catalog.build import merge_catalogs

    _report(out, merge_catalogs(parts, out), json_out)


def _report(out: Path, entries: list[Any], json_out: bool) -> None:
    ok = [e for e in entries if e.status == "ok"]
    failed = [e for e in entries if e.status != "ok"]
    if json_out:
        print_json({"out": str(out), "n_built": len(ok), "n_failed": len(failed),
                    "failures": [{"material_id": e.material_id, "reason": e.reason} for e in failed]})
        return
    con = console()
    con.print(f"{len(ok)} materials built, {len(failed)} failed -> {esc(out)}", highlight=False)
    for e in failed:
        con.print(f"  [yellow]{esc(e.material_id)}[/]: {esc(e.reason)}", highlight=False)
