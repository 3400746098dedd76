"""``c2np identify FILE --frames SPEC``: per-frame answers and one from time-averaged positions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import typer

from c2np.cli._common import console, esc, open_executor, print_json


def _solve_frame(_: Any, item: tuple[int, np.ndarray, np.ndarray]) -> dict[str, Any]:
    """Worker side: one frame's answer (:meth:`SolverResult.to_dict` without the cell) or its
    error with the kind ("no answer": exit 1, "bad input": exit 2)."""
    from c2np.errors import C2NPInputError, C2NPNoAnswerError
    from c2np.solver import solve

    index, numbers, positions = item
    try:
        data = solve(numbers, positions).to_dict()
    except C2NPInputError as exc:
        kind = "no answer" if isinstance(exc, C2NPNoAnswerError) else "bad input"
        return {"frame": index, "error": str(exc), "kind": kind}
    data.pop("cell", None)
    return {"frame": index, **data}


def identify_frames(path: Path, *, frames: str, species: dict[int, int] | None, fmt: str | None,
                    cif_out: Path | None, json_out: bool, workers: int, scheduler: str | None,
                    top: int = 1) -> None:
    """Solve every selected frame of ``path`` and the time-averaged positions (with the ``top``
    best answers); print a table (or JSON with ``per_frame`` and ``averaged``); exit 1 when the
    averaged positions have no answer."""
    from c2np.cells import write_symmetrized_cif
    from c2np.errors import C2NPInputError, C2NPNoAnswerError
    from c2np.solver import solve_particle
    from c2np.trajectory import average_frames, describe_trajectory, parse_frame_selection, read_trajectory

    traj = read_trajectory(path, frames=parse_frame_selection(frames), species=species, fmt=fmt)
    items = [(int(i), traj.numbers, traj.positions_angstrom[k]) for k, i in enumerate(traj.frame_indices)]
    with open_executor(workers, scheduler) as ex:
        per_frame = [r for part in ex.map(_solve_frame, items) for r in part]
    avg = average_frames(traj)
    averaged: dict[str, Any] = {"n_frames": avg.n_frames, "rms_fluctuation_angstrom": avg.rms_fluctuation_angstrom,
                                "max_atom_rms_angstrom": avg.max_atom_rms_angstrom}
    code = 0
    try:
        result = solve_particle(avg.particle, top_k=top)
    except C2NPInputError as exc:
        code = 1 if isinstance(exc, C2NPNoAnswerError) else 2
        averaged.update(error=f"{path}: time-averaged positions: {exc}",
                        kind="no answer" if code == 1 else "bad input")
        result = None
    if result is not None:
        cell = result.cell.with_id(path.stem)
        averaged.update(result.to_dict())
        averaged["cell"] = cell.to_dict()
        if cif_out is not None:
            write_symmetrized_cif(cell, cif_out, symprec_angstrom=result.symprec_angstrom)
            averaged["cif"] = str(cif_out)
    if json_out:
        print_json({**describe_trajectory(traj), "per_frame": per_frame, "averaged": averaged})
    else:
        _print_table(path, traj.numbers.size, per_frame, averaged)
    if code:
        raise typer.Exit(code)


def _row(label: str, r: dict[str, Any]) -> list[str]:
    if "error" in r:
        return [label, f"[red]{esc(r['kind'])}[/]", esc(str(r["error"]))[:120], "", ""]
    return [label, f"{esc(str(r['international']))} ({r['spacegroup']})",
            f"{r['a']:.4f} {r['b']:.4f} {r['c']:.4f}", f"{r['alpha']:.3f} {r['beta']:.3f} {r['gamma']:.3f}",
            f"{r['confidence']:.3f}"]


def _print_table(path: Path, n_atoms: int, per_frame: list[dict[str, Any]], averaged: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"{esc(path.name)}: {n_atoms} atoms, {len(per_frame)} frames")
    for col in ("frame", "space group", "a, b, c (Å)", "alpha, beta, gamma (°)", "confidence"):
        table.add_column(col)
    for r in per_frame:
        table.add_row(*_row(str(r["frame"]), r))
    table.add_row(*_row(f"mean of {averaged['n_frames']}", averaged), style="bold")
    con = console()
    con.print(table)
    con.print(f"time-averaged positions: rms fluctuation {averaged['rms_fluctuation_angstrom']:.3f} Å, "
              f"largest per atom {averaged['max_atom_rms_angstrom']:.3f} Å")
    if "cif" in averaged:
        con.print(f"reconstructed cell of the time-averaged positions -> {esc(averaged['cif'])}")
