"""``c2np identify PARTICLE``: recover the bulk crystal of a particle with the solver."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from c2np.cli._common import SCHEDULER_HELP, console, esc, handle_errors, open_executor, print_json
from c2np.fileio import check_output_path


def register(app: typer.Typer) -> None:
    """Add the ``identify`` command to ``app``."""
    app.command("identify")(identify_cmd)


@handle_errors
def identify_cmd(
    particle_paths: list[Path] = typer.Argument(..., help="Particles: .xyz / .extxyz, .cif read as a finite "
                                                          "cluster, or any structure or trajectory file ASE "
                                                          "reads (LAMMPS dump, POSCAR, PDB, .traj, ...); the "
                                                          "first frame unless --frames; several files are "
                                                          "solved on the executor seam."),
    frames: Optional[str] = typer.Option(None, "--frames", help="Solve these frames of a trajectory (all, N, "
                                         "START:STOP[:STEP]) and their time-averaged positions (one file)."),
    species: Optional[str] = typer.Option(None, "--species", help="Elements of LAMMPS type ids, e.g. "
                                          "1=Cu,2=Au (dumps without an element column)."),
    fmt: Optional[str] = typer.Option(None, "--format", help="The file's format as ASE names it (e.g. "
                                      "lammps-dump-text, vasp, proteindatabank); default: from the suffix "
                                      "or the content."),
    cif_out: Optional[Path] = typer.Option(None, "--cif", help="Write the reconstructed conventional "
                                           "cell to this CIF in its space group (symmetry operations, "
                                           "asymmetric unit; one file only)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object (a list for several "
                                                         "files) instead of text."),
    workers: int = typer.Option(1, "--workers", help="Several files: processes solving them "
                                "(0: one per available CPU). The answers do not depend on it."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
    top: int = typer.Option(1, "--top", min=1, help="Also give the K best answers (space group, lattice, "
                            "probability), best first; in JSON as \"candidates\"."),
) -> None:
    """Identify the crystal a particle was cut from: lattice, space group, confidence.

    With several files each is one outcome (identified, no answer, bad input); the exit code
    is the worst of them (0 all identified, 1 some had no answer, 2 some were bad input)."""
    if len(particle_paths) > 1 and (frames, species, fmt) != (None, None, None):
        from c2np.errors import C2NPInputError

        raise C2NPInputError("--frames, --species and --format read one file; give one particle file")
    if len(particle_paths) > 1:
        _identify_many(particle_paths, cif_out=cif_out, json_out=json_out, workers=workers,
                       scheduler=scheduler, top=top)
        return
    particle_path = particle_paths[0]
    if cif_out is not None:
        check_output_path(cif_out)
    species_map = _species_option(species)
    if frames is not None:
        from c2np.cli._identify_frames import identify_frames

        identify_frames(particle_path, frames=frames, species=species_map, fmt=fmt, cif_out=cif_out,
                        json_out=json_out, workers=workers, scheduler=scheduler, top=top)
        return
    from c2np.cells import write_symmetrized_cif
    from c2np.errors import C2NPInputError
    from c2np.particle_io import read_particle
    from c2np.solver import solve_particle

    if (species_map, fmt) == (None, None) and particle_path.suffix.lower() in (".xyz", ".extxyz", ".cif"):
        particle = read_particle(particle_path)
    else:  # any other structure or trajectory format (first frame)
        from c2np.trajectory import read_structure

        particle = read_structure(particle_path, species=species_map, fmt=fmt)
    try:
        result = solve_particle(particle, top_k=top)
    except C2NPInputError as exc:  # keeps the kind: no lattice found (exit 1) or bad input (exit 2)
        raise type(exc)(f"{particle_path}: {exc}") from exc
    cell = result.cell.with_id(particle_path.stem)
    if cif_out is not None:  # the conventional cell in its space group, as the solver found it
        write_symmetrized_cif(cell, cif_out, symprec_angstrom=result.symprec_angstrom)
    if json_out:
        data = result.to_dict()
        data["cell"] = cell.to_dict()
        data["file"] = str(particle_path)
        if cif_out is not None:
            data["cif"] = str(cif_out)
        print_json(data)
        return
    from rich.table import Table

    con = console()
    table = Table(title=f"{esc(particle_path.name)}: {result.n_atoms} atoms", show_header=False)
    table.add_column("quantity", style="bold")
    table.add_column("value")
    table.add_row("space group", f"{result.international} (No. {result.spacegroup}), "
                                 f"{result.crystal_system}")
    lat = result.lattice
    table.add_row("a, b, c (Å)", f"{lat.a_angstrom:.4f}  {lat.b_angstrom:.4f}  {lat.c_angstrom:.4f}")
    table.add_row("alpha, beta, gamma (°)", f"{lat.alpha_deg:.3f}  {lat.beta_deg:.3f}  {lat.gamma_deg:.3f}")
    table.add_row("confidence", f"{result.confidence:.3f}")
    table.add_row("lattice spread (Å)", f"{result.lattice_spread_angstrom:.3g}")
    table.add_row("degree of order", f"{result.degree_of_order:.3f}")
    table.add_row("tolerance (Å)", f"{result.symprec_angstrom:g}")
    table.add_row("atoms on sites", f"{result.diagnostics['explained_fraction']:.3f} "
                                    f"({result.diagnostics['n_sites']} sites per primitive cell)")
    con.print(table)
    if top > 1:
        ranked = Table(title="ranked answers")
        for col in ("rank", "space group", "a, b, c (Å)", "alpha, beta, gamma (°)", "probability"):
            ranked.add_column(col)
        for i, cand in enumerate(result.candidates, 1):
            cl = cand.lattice
            ranked.add_row(str(i), f"{esc(cand.international)} ({cand.spacegroup})",
                           f"{cl.a_angstrom:.4f} {cl.b_angstrom:.4f} {cl.c_angstrom:.4f}",
                           f"{cl.alpha_deg:.3f} {cl.beta_deg:.3f} {cl.gamma_deg:.3f}", f"{cand.probability:.3f}")
        con.print(ranked)
    if result.confidence < 0.5:
        con.print("[yellow]warning:[/] low confidence: the particle is not well explained by one "
                  "crystal (noise, defects, or too small)")
    if cif_out is not None:
        con.print(f"reconstructed cell ({esc(result.international)}, conventional, symmetry operations "
                  f"and asymmetric unit) -> {esc(cif_out)}")


def _species_option(species: Optional[str]) -> Optional[dict[int, int]]:
    """``--species`` parsed (LAMMPS type id -> atomic number), or None."""
    if species is None:
        return None
    from c2np.trajectory import parse_species_map

    return parse_species_map(species)


def _identify_many(paths: list[Path], *, cif_out: Optional[Path], json_out: bool, workers: int,
                   scheduler: Optional[str], top: int = 1) -> None:
    from c2np.errors import C2NPInputError
    from c2np.solver.batch import solve_files

    if cif_out is not None:
        raise C2NPInputError("--cif: give one particle file to write its reconstructed cell")
    with open_executor(workers, scheduler) as ex:
        outcomes = solve_files(paths, executor=ex, top_k=top)
    code = max(o.exit_code for o in outcomes)
    if json_out:
        print_json([o.result if o.result is not None else {"file": o.file, "error": o.error, "kind": o.kind}
                    for o in outcomes])
    else:
        from rich.table import Table

        table = Table(title=f"{len(outcomes)} particles")
        for col in ("file", "space group", "a, b, c (Å)", "alpha, beta, gamma (°)", "confidence"):
            table.add_column(col)
        for o in outcomes:
            if o.result is None:
                table.add_row(esc(o.file), f"[red]{esc(o.kind or '')}[/]", esc(o.error or ""), "", "")
                continue
            r = o.result
            table.add_row(esc(o.file), f"{esc(str(r['international']))} ({r['spacegroup']})",
                          f"{r['a']:.4f} {r['b']:.4f} {r['c']:.4f}",
                          f"{r['alpha']:.3f} {r['beta']:.3f} {r['gamma']:.3f}", f"{r['confidence']:.3f}")
        console().print(table)
    if code:
        raise typer.Exit(code)
