"""Reading a generated cell: its space group and conventional lattice by spglib under a
tolerance sweep (:func:`read_cell_to_prediction`), and its shortest interatomic distance
(:func:`min_pair_distance_angstrom`). Torch-free."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from c2np.cells import standardize
from c2np.errors import C2NPInputError
from c2np.models.inverse.config import READ_RULES

__all__ = ["SYMPREC_SWEEP_ANGSTROM", "SYMPREC_FINE_SWEEP_ANGSTROM", "SYMPREC_TEMPLATE_LADDER_ANGSTROM",
           "read_cell_to_prediction", "min_pair_distance_angstrom"]

SYMPREC_SWEEP_ANGSTROM: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3)
SYMPREC_FINE_SWEEP_ANGSTROM: tuple[float, ...] = (0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3)
SYMPREC_TEMPLATE_LADDER_ANGSTROM: tuple[float, ...] = (0.005, 0.002, 1e-3, 3e-4, 1e-4)


def read_cell_to_prediction(lattice_angstrom: np.ndarray, frac: np.ndarray, numbers: np.ndarray, *,
                            sweep_angstrom: Iterable[float] | None = None, rule: str = "plateau",
                            template_spacegroup: int = 0) -> tuple[np.ndarray, int] | None:
    """Space group and conventional lattice parameters of a generated cell by
    :func:`c2np.cells.standardize` under a tolerance sweep (tight to loose; default
    :data:`SYMPREC_SWEEP_ANGSTROM`, or :data:`SYMPREC_FINE_SWEEP_ANGSTROM` for ``longest``).

    ``plateau``: the first tolerance whose group equals the next one's; none -> 0.1 Å (or the
    loosest that works). ``longest``: the group found over the longest run of consecutive
    tolerances (ties: the looser run), read at the run's tightest tolerance — a generated
    cell with errors of ~delta Å and a true distortion of ~Delta Å shows its group over
    (~4 delta, Delta) and P1 below (spglib needs a tolerance of ~4-5x the noise sigma).
    ``tight``: the group at the tightest tolerance spglib reads (for cells that are exactly
    symmetric by construction, :mod:`c2np.models.inverse.templates`). ``template``: for a cell
    sampled under a template of group ``template_spacegroup``, that group at the loosest
    tolerance of :data:`SYMPREC_TEMPLATE_LADDER_ANGSTROM` (0.005 Å down to 1e-4 Å) where spglib
    reads it — a cell projected onto the template is exactly symmetric in it, so a read of a
    higher group at 0.005 Å means its distortion from that group is under 0.005 Å, not that it
    lacks the template's symmetry; not found at any (or no template) -> ``tight``. None when
    spglib finds nothing at any tolerance or the lattice is degenerate."""
    if rule not in READ_RULES:
        raise C2NPInputError(f"read-out rule must be one of {list(READ_RULES)}, got {rule!r}")
    if sweep_angstrom is None:
        sweep_angstrom = {"plateau": SYMPREC_SWEEP_ANGSTROM, "template": SYMPREC_TEMPLATE_LADDER_ANGSTROM
                          }.get(rule, SYMPREC_FINE_SWEEP_ANGSTROM)
    lat = np.asarray(lattice_angstrom, dtype=np.float64)
    if not np.all(np.isfinite(lat)) or abs(np.linalg.det(lat)) < 1e-3:
        return None
    cell = (lat, np.asarray(frac, dtype=np.float64) % 1.0, np.asarray(numbers, dtype=np.int64))
    found: list[tuple[float, Any]] = []
    for tol in sweep_angstrom:
        try:
            found.append((float(tol), standardize(cell, symprec_angstrom=float(tol))))
        except C2NPInputError:
            continue
        if rule == "template" and found[-1][1].spacegroup == template_spacegroup:
            break       # the loosest tolerance that reads the template's group: the answer
    if not found:
        return None
    pick = found[0][1] if rule in ("tight", "template") else None
    if rule == "template":
        pick = next((s for _, s in found if s.spacegroup == template_spacegroup), pick)
    if rule == "longest":
        best_len, start = 0, 0
        for k in range(len(found) + 1):
            if k == len(found) or found[k][1].spacegroup != found[start][1].spacegroup:
                if k - start >= best_len:      # ties: the looser run
                    best_len, pick = k - start, found[start][1]
                start = k
    elif rule == "plateau":
        for (_, s1), (_, s2) in zip(found, found[1:]):
            if s1.spacegroup == s2.spacegroup:
                pick = s1
                break
    if pick is None:
        near = [s for t, s in found if t <= 0.1]
        pick = near[-1] if near else found[-1][1]
    return pick.parameters.as_array(), int(pick.spacegroup)


def min_pair_distance_angstrom(lattice_angstrom: np.ndarray, frac: np.ndarray) -> float:
    """The shortest distance (Å) between two atoms of a periodic cell, periodic images
    included (minimum image over the 27 neighbouring cells after wrapping); lattice (3, 3)
    rows a, b, c; frac (n, 3). ``inf`` for a single atom in a cell whose shortest lattice
    vector is not shorter than the images considered."""
    lat = np.asarray(lattice_angstrom, dtype=np.float64)
    f = np.asarray(frac, dtype=np.float64) % 1.0
    d = f[None, :, :] - f[:, None, :]
    d = d - np.round(d)
    shifts = np.array([(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)], dtype=np.float64)
    cart = (d[:, :, None, :] + shifts[None, None]) @ lat                     # (n, n, 27, 3)
    r = np.linalg.norm(cart, axis=-1)
    n = len(f)
    r[np.arange(n), np.arange(n), 13] = np.inf                               # an atom and itself
    return float(r.min()) if r.size else float("inf")

