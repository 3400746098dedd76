"""Step 9 of the solver: is the answer right? The reconstructed cell, placed in the found
frame, must reproduce the particle (composition, density, atoms on sites), and the space
group must be what a second symmetry library (spglib) finds on it at the reported tolerance."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = [
    "MAX_ATOMS_PER_SLOT",
    "MAX_COMPOSITION_DEVIATION",
    "MAX_DENSITY_DEVIATION",
    "MIN_MATCHED_FRACTION",
    "Verification",
    "spglib_number",
    "verify_cell",
]

#: Largest difference of an element's share between the cell and the particle.
MAX_COMPOSITION_DEVIATION = 0.15
#: Largest relative difference between the density of the standardized cell and of the sites
#: found (symmetrization that merges sites loses atoms).
MAX_DENSITY_DEVIATION = 0.03
#: Most atoms per (site, cell) place before the cell counts as too small (lost atoms).
MAX_ATOMS_PER_SLOT = 1.05
#: Fewest atoms on reconstructed sites.
MIN_MATCHED_FRACTION = 0.6
#: Confidence factor when spglib finds another group at the reported tolerance.
DISAGREEMENT_FACTOR = 0.5


@dataclass(frozen=True)
class Verification:
    """The checks of one answer.

    Attributes:
        composition_deviation: largest difference of an element's share, cell vs particle.
        density_ratio: atoms per Å^3 of the standardized cell over that of the sites found.
        atoms_per_slot: particle atoms per (site, cell) place (1: every atom has its own).
        matched_fraction: atoms within the cluster radius of a site of their element.
        spglib_spacegroup: spglib's group of the reconstructed cell at the reported
            tolerance (None where spglib finds none or is not installed).
        refusal: why the answer is refused (None: it stands).
        factor: confidence factor (1, or ``DISAGREEMENT_FACTOR`` when spglib disagrees).
    """

    composition_deviation: float
    density_ratio: float
    atoms_per_slot: float
    matched_fraction: float
    spglib_spacegroup: int | None
    refusal: str | None
    factor: float


def spglib_number(lattice: np.ndarray, frac: np.ndarray, numbers: np.ndarray, *,
                  symprec_angstrom: float) -> int | None:
    """spglib's international number of the cell ((3, 3) rows in Å, (m, 3) fractional,
    (m,)) at ``symprec_angstrom``; None where it finds none or spglib is missing."""
    try:
        import spglib
    except ImportError:
        return None
    cell = (np.asarray(lattice, dtype=float), np.asarray(frac, dtype=float), np.asarray(numbers, dtype=int))
    # spglib's C library prints warnings on stderr unless SPGLIB_WARNING=OFF (read per call)
    before = os.environ.get("SPGLIB_WARNING")
    os.environ["SPGLIB_WARNING"] = "OFF"
    try:
        ds = spglib.get_symmetry_dataset(cell, symprec=float(symprec_angstrom))  # type: ignore[arg-type]
    except Exception:  # spglib raises its own error types for a degenerate cell: no group
        return None
    finally:
        if before is None:
            os.environ.pop("SPGLIB_WARNING", None)
        else:
            os.environ["SPGLIB_WARNING"] = before
    return None if ds is None else int(ds.number)


def _shares(numbers: np.ndarray, zs: np.ndarray) -> np.ndarray:
    return np.array([np.mean(numbers == z) for z in zs]) if len(numbers) else np.zeros(len(zs))


def verify_cell(particle_numbers: np.ndarray, site_lattice: np.ndarray, site_frac: np.ndarray,
                site_numbers: np.ndarray, std_lattice: np.ndarray, std_frac: np.ndarray,
                std_numbers: np.ndarray, spacegroup: int, *, symprec_angstrom: float,
                matched_fraction: float, atoms_per_slot: float) -> Verification:
    """Check an answer: the standardized cell (``std_*``; (3, 3) Å rows, (s, 3) fractional,
    (s,)) against the particle's composition (``particle_numbers`` (n,)) and the sites found
    (``site_*``), the atoms on sites (``matched_fraction``, ``atoms_per_slot`` from the site
    fit), and ``spacegroup`` against spglib on the sites at ``symprec_angstrom``."""
    zs = np.unique(np.concatenate([np.asarray(particle_numbers), np.asarray(std_numbers)]))
    comp_dev = float(np.max(np.abs(_shares(np.asarray(std_numbers), zs) - _shares(np.asarray(particle_numbers), zs))))
    vol_std = abs(float(np.linalg.det(std_lattice)))
    vol_sites = abs(float(np.linalg.det(site_lattice)))
    density = (len(std_numbers) / vol_std) / (len(site_numbers) / vol_sites) if vol_std > 0 and vol_sites > 0 else 0.0
    reasons: list[str] = []
    if comp_dev > MAX_COMPOSITION_DEVIATION:
        reasons.append(f"the reconstructed cell's composition differs from the particle's (an element's share "
                       f"by {comp_dev:.2f})")
    if abs(density - 1.0) > MAX_DENSITY_DEVIATION:
        reasons.append(f"the symmetrized cell holds {density:.2f} times the density of the sites found "
                       "(sites merged or duplicated)")
    if atoms_per_slot > MAX_ATOMS_PER_SLOT:
        reasons.append(f"the cell is too small for the particle ({atoms_per_slot:.2f} atoms per site and cell: "
                       f"the reconstructed cell lost atoms)")
    if matched_fraction < MIN_MATCHED_FRACTION:
        reasons.append(f"only {matched_fraction:.0%} of the atoms sit on a reconstructed site")
    other = spglib_number(site_lattice, site_frac, site_numbers, symprec_angstrom=symprec_angstrom)
    factor = 1.0 if other == int(spacegroup) else DISAGREEMENT_FACTOR
    refusal = "; ".join(reasons) if reasons else None
    return Verification(comp_dev, float(density), float(atoms_per_slot), float(matched_fraction), other,
                        refusal, factor)
