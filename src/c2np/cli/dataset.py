"""Commands on cells, particles and dataset stores: carve, build, info, verify, export,
import-original."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from c2np.cli._common import console, handle_errors, print_json


def register(app: typer.Typer) -> None:
    """Add the dataset commands to ``app``."""
    app.command("carve")(carve_cmd)


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
    con.print(f"carved [bold]{res.particle.n_atoms}[/] atoms of {cell.material_id} "
              f"(R = {res.radius_angstrom:g} Å) -> {out}")
    if res.boundary_margin_angstrom < 1e-3:
        con.print(f"[yellow]warning:[/] a lattice shell lies {res.boundary_margin_angstrom:.2e} Å "
                  "from the sphere: the atom count is tolerance-sensitive")
    if res.paper_supercell_clips:
        con.print("[yellow]note:[/] the paper's 20x20x20 supercell would clip this sphere")
