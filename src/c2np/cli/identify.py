"""``c2np identify PARTICLE``: recover the bulk crystal of a particle with the solver."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from c2np.cli._common import console, esc, handle_errors, print_json
from c2np.fileio import check_output_path


def register(app: typer.Typer) -> None:
    """Add the ``identify`` command to ``app``."""
    app.command("identify")(identify_cmd)


@handle_errors
def identify_cmd(
    particle_path: Path = typer.Argument(..., help="Particle: .xyz / .extxyz (first frame) or a "
                                                    ".cif read as a finite cluster."),
    cif_out: Optional[Path] = typer.Option(None, "--cif", help="Write the reconstructed "
                                                               "conventional cell to this CIF."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
) -> None:
    """Identify the crystal a particle was cut from: lattice, space group, confidence."""
    if cif_out is not None:
        check_output_path(cif_out)
    from c2np.cells import write_cif
    from c2np.errors import C2NPInputError
    from c2np.particle_io import read_particle
    from c2np.solver import solve_particle

    particle = read_particle(particle_path)
    try:
        result = solve_particle(particle)
    except C2NPInputError as exc:  # keeps the kind: no lattice found (exit 1) or bad input (exit 2)
        raise type(exc)(f"{particle_path}: {exc}") from exc
    cell = result.cell.with_id(particle_path.stem)
    if cif_out is not None:
        write_cif(cell, cif_out)
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
    table.add_row("tolerance (Å)", f"{result.symprec_angstrom:g}")
    table.add_row("atoms on sites", f"{result.diagnostics['explained_fraction']:.3f} "
                                    f"({result.diagnostics['n_sites']} sites per primitive cell)")
    con.print(table)
    if result.confidence < 0.5:
        con.print("[yellow]warning:[/] low confidence: the particle is not well explained by one "
                  "crystal (noise, defects, or too small)")
    if cif_out is not None:
        con.print(f"reconstructed cell -> {esc(cif_out)}")
