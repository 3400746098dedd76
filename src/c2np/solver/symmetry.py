"""Step 7 of the solver: the space group, from a sweep of tolerances (moyopy, through the
bounded :mod:`c2np.solver.symmetry_finder`), with sites absent from a small particle restored
by symmetry."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from c2np.errors import C2NPLimitError, C2NPNoAnswerError
from c2np.solver.geometry import min_image, nearest_distinct_site_angstrom
from c2np.solver.settings import SolverSettings
from c2np.solver.sites import SiteFit
from c2np.solver.symmetry_finder import SymmetryDataset, find_symmetry, lattice_rotation_count

#: The symmetry tolerance is at least this many times the spread of the local lattices.
LATTICE_SPREAD_FACTOR = 3.0

__all__ = [
    "SweepStep",
    "SymmetryChoice",
    "SymmetrySweep",
    "choose_symmetry",
    "complete_sites",
    "symmetry_sweep",
]


@dataclass(frozen=True, eq=False)
class SweepStep:
    """moyopy at one tolerance: ``spacegroup`` and ``dataset`` are None where moyopy found
    no consistent group."""

    symprec_angstrom: float
    spacegroup: int | None
    dataset: SymmetryDataset | None


@dataclass(frozen=True, eq=False)
class SymmetrySweep:
    """The tolerances tried (tight to loose), the chosen step and its plateau length;
    ``stopped_by`` is the limit message when a call exceeded a symmetry-finder limit and
    the sweep ended there (None otherwise)."""

    steps: tuple[SweepStep, ...]
    chosen: SweepStep
    plateau_length: int
    stopped_by: str | None = None


@dataclass(frozen=True, eq=False)
class SymmetryChoice:
    """The space group of the reconstructed cell.

    Attributes:
        sweep: the sweep that gave it (on the completed sites when some were restored).
        floor_angstrom: the noise floor below which tolerances were skipped (Å).
        n_restored: sites added by symmetry.
        n_sites_seen: sites seen in the particle.
        ceiling_angstrom: the tolerance from which on none was tried: half the shortest
            distance between two distinct sites of one element (Å).
    """

    sweep: SymmetrySweep
    floor_angstrom: float
    n_restored: int
    n_sites_seen: int
    ceiling_angstrom: float = float("inf")
    cell_frac: np.ndarray | None = None
    cell_numbers: np.ndarray | None = None

    @property
    def symprec_angstrom(self) -> float:
        """Tolerance at which the group was chosen (Å)."""
        return float(self.sweep.chosen.symprec_angstrom)

    @property
    def spacegroup(self) -> int:
        """International number 1..230."""
        assert self.sweep.chosen.spacegroup is not None
        return int(self.sweep.chosen.spacegroup)

    @property
    def dataset(self) -> SymmetryDataset:
        """moyopy's dataset at the chosen tolerance."""
        assert self.sweep.chosen.dataset is not None
        return self.sweep.chosen.dataset


def symmetry_sweep(lattice: np.ndarray, frac: np.ndarray, numbers: np.ndarray,
                   tolerances: list[float], stable_plateau: int) -> SymmetrySweep:
    """moyopy on the cell ((3, 3) lattice in Å, (m, 3) fractional sites, (m,) numbers) over
    tolerances (tight to loose). The chosen group is the first one found at two
    consecutive tolerances (at the tightest tolerance of its plateau); without any
    plateau, the most frequent group (ties: tighter). A call that exceeds a limit of the
    symmetry finder ends the sweep (looser tolerances cost more); the groups found before
    it still count, and without any the limit error is raised."""
    records: list[SweepStep] = []
    chosen: int | None = None
    run_start = 0
    stopped_by: str | None = None
    for sp in tolerances:
        try:
            ds = find_symmetry(lattice, frac, numbers, symprec_angstrom=float(sp))
        except C2NPLimitError as exc:
            if not any(rec.spacegroup is not None for rec in records):
                raise
            stopped_by = str(exc)
            break
        records.append(SweepStep(sp, None if ds is None else int(ds.number), ds))
        k = len(records) - 1
        if not (k > 0 and records[k].spacegroup is not None
                and records[k].spacegroup == records[k - 1].spacegroup):
            run_start = k
        run = k - run_start + 1
        if chosen is None and run >= 2:
            chosen = run_start
        if chosen is not None and (run_start != chosen or run >= stable_plateau):
            break
    if chosen is not None:
        j = chosen
        while j + 1 < len(records) and records[j + 1].spacegroup == records[chosen].spacegroup:
            j += 1
        plateau = j - chosen + 1
        return SymmetrySweep(tuple(records), records[chosen], plateau, stopped_by)
    found = [rec for rec in records if rec.spacegroup is not None]
    if not found:
        raise C2NPNoAnswerError("solver input: no space group could be assigned to the "
                                "reconstructed cell at any tolerance")
    sgs = [rec.spacegroup for rec in found]
    best = max(sgs, key=lambda g: (sgs.count(g), -sgs.index(g)))
    return SymmetrySweep(tuple(records), next(rec for rec in found if rec.spacegroup == best), 1, stopped_by)


def complete_sites(lattice: np.ndarray, frac: np.ndarray, numbers: np.ndarray, *,
                   tol_angstrom: float, max_missing: int = SolverSettings.max_restored_sites,
                   min_lattice_tol_angstrom: float = SolverSettings.min_restore_tol_angstrom
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Sites absent from a small particle, restored by symmetry.

    Each rotation of the lattice's point group (found at ``max(tol_angstrom,
    min_lattice_tol_angstrom)``) is paired with the translations that map one site of the
    rarest species onto another; an operation under which every site but at most
    ``max_missing`` lands on a site of its species (within ``tol_angstrom``) is taken as a
    symmetry, and the images that land nowhere become new sites. Returns (frac, numbers)
    with the new sites appended (unchanged when none is found). Shapes (m, 3), (m,).
    """
    lat_ds = find_symmetry(lattice, np.zeros((1, 3)), np.ones(1, dtype=np.int64),
                           symprec_angstrom=max(tol_angstrom, min_lattice_tol_angstrom))
    if lat_ds is None:
        return frac, numbers
    rots = np.asarray(lat_ds.rotations, dtype=float)
    zs, cnt = np.unique(numbers, return_counts=True)
    z_ref = zs[np.argmin(cnt)]
    ref = np.flatnonzero(numbers == z_ref)
    new_f: list[np.ndarray] = []
    new_z: list[int] = []

    def unmatched(img: np.ndarray, z_img: np.ndarray, f_all: np.ndarray, z_all: np.ndarray) -> np.ndarray:
        d = min_image(img[:, None, :] - f_all[None, :, :]) @ lattice
        dist = np.linalg.norm(d, axis=2)
        dist[z_img[:, None] != z_all[None, :]] = np.inf
        return np.min(dist, axis=1) > tol_angstrom

    for w in rots:
        wf = frac @ w.T
        for j in ref:
            tau = frac[j] - wf[ref[0]]
            img = wf + tau
            miss = unmatched(img, numbers, frac, numbers)
            if not miss.any() or int(miss.sum()) > max_missing or miss.sum() * 5 >= len(frac):
                continue
            for f_new, z_new in zip(img[miss], numbers[miss]):
                if new_f and not unmatched(f_new[None], np.array([z_new]), np.array(new_f),
                                           np.array(new_z))[0]:
                    continue
                new_f.append(f_new - np.floor(f_new))
                new_z.append(int(z_new))
    if not new_f or len(new_f) > max_missing:
        return frac, numbers
    return np.vstack([frac, np.array(new_f)]), np.concatenate([numbers, np.array(new_z, dtype=numbers.dtype)])


def choose_symmetry(sites: SiteFit, settings: SolverSettings) -> SymmetryChoice:
    """Sweep the tolerances from a noise floor (estimated from the site scatter) upwards;
    when a site is seen at most twice and the group is below the lattice's point group,
    restore absent sites and keep the completed cell if it is more symmetric.

    No tolerance from half the shortest distance between two distinct sites of one element
    on is tried: there those sites merge, and the symmetry finder would build a cell out of
    noise coincidences (where its search can grow without bound). When the noise floor is
    already above that ceiling, the particle is too noisy for a space group
    (:class:`C2NPNoAnswerError`)."""
    lattice, prim_frac, prim_z = sites.lattice_angstrom, sites.frac, sites.numbers
    counts_used = sites.counts
    sweep = settings.symprec_sweep_angstrom
    sigma_pos = sites.rms_angstrom / np.sqrt(3.0) if np.isfinite(sites.rms_angstrom) else sites.sigma_angstrom
    sigma_site = sigma_pos / np.sqrt(max(float(np.min(counts_used)), 1.0))
    # a real particle's lattice is strained (thermal motion, surface relaxation): no tolerance
    # tighter than the spread of its local lattices can tell a symmetry from a strain
    floor = max(sweep[0], 6.0 * sigma_site, LATTICE_SPREAD_FACTOR * sites.lattice_spread_angstrom)
    tried = [s for s in sweep if s >= floor] or [floor, 1.5 * floor, 2.25 * floor]
    ceiling = 0.5 * nearest_distinct_site_angstrom(lattice, prim_frac, prim_z)
    capped = [s for s in tried if s < ceiling]
    if not capped:
        raise C2NPNoAnswerError(
            f"solver input: the reconstructed sites are too noisy for a space group: the noise floor "
            f"{floor:.3g} Å reaches half the distance between two distinct sites of one element "
            f"({ceiling:.3g} Å)")
    tried = capped
    result = symmetry_sweep(lattice, prim_frac, prim_z, tried, settings.stable_plateau)
    sp, ds = result.chosen.symprec_angstrom, result.chosen.dataset
    assert result.chosen.spacegroup is not None and ds is not None
    n_restored = 0
    cell_frac, cell_z = prim_frac, prim_z
    restore_tol = max(float(sp), settings.min_restore_tol_angstrom)
    if (float(np.min(counts_used)) <= 2 and len(prim_z) <= settings.restore_max_sites
            and ds.n_operations < lattice_rotation_count(lattice, symprec_angstrom=restore_tol)):
        # a small particle may hold no atom of some site, which lowers the symmetry found;
        # such a site is restored from the operations the other sites obey, and kept when
        # the completed cell is more symmetric
        c_frac, c_z = complete_sites(lattice, prim_frac, prim_z, tol_angstrom=restore_tol,
                                     max_missing=settings.max_restored_sites,
                                     min_lattice_tol_angstrom=settings.min_restore_tol_angstrom)
        if len(c_z) > len(prim_z):
            again = symmetry_sweep(lattice, c_frac, c_z, tried, settings.stable_plateau)
            if again.chosen.dataset is not None and again.chosen.dataset.n_operations > ds.n_operations:
                n_restored = len(c_z) - len(prim_z)
                result = again
                cell_frac, cell_z = c_frac, c_z
    return SymmetryChoice(result, float(floor), int(n_restored), len(prim_z), float(ceiling), cell_frac, cell_z)
