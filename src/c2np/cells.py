"""Unit cells: the frozen record, CIF reading/writing, and symmetry standardization.

Conventions (contract §1-2): lengths in Å, angles in degrees, lattice rows are the vectors
a, b, c in ASE's Cartesian frame (a along x, b in the xy plane for a cell read from
parameters), coordinates fractional.
"""

from __future__ import annotations

import functools
import io
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from c2np.errors import C2NPInputError
from c2np.fileio import atomic_path
from c2np.lattice import LatticeParameters

__all__ = [
    "UnitCell",
    "StandardCell",
    "lattice_parameters",
    "read_cif",
    "read_cif_text",
    "read_cells",
    "write_cif",
    "standardize",
    "crystal_system",
    "bravais_lattice",
]


def _frozen(array: Any, dtype: Any, shape_tail: tuple[int, ...], what: str) -> np.ndarray:
    out = np.array(array, dtype=dtype, copy=True)
    if out.ndim != 1 + len(shape_tail) or tuple(out.shape[1:]) != shape_tail:
        raise C2NPInputError(f"{what}: expected shape (n, {', '.join(map(str, shape_tail))}) "
                             f"but got {out.shape}")
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class UnitCell:
    """A periodic unit cell.

    Attributes:
        material_id: name of the material (unique within a dataset).
        lattice_angstrom: (3, 3) float64, rows are the lattice vectors a, b, c in Å.
        numbers: (n,) int64 atomic numbers of the basis atoms.
        frac_coords: (n, 3) float64 fractional coordinates of the basis atoms.
    """

    material_id: str
    lattice_angstrom: np.ndarray
    numbers: np.ndarray
    frac_coords: np.ndarray

    def __post_init__(self) -> None:
        lat = np.array(self.lattice_angstrom, dtype=np.float64, copy=True)
        if lat.shape != (3, 3):
            raise C2NPInputError(f"cell {self.material_id!r}: lattice must be 3x3, got {lat.shape}")
        nums = np.array(self.numbers, dtype=np.int64, copy=True).reshape(-1)
        frac = _frozen(self.frac_coords, np.float64, (3,), f"cell {self.material_id!r} frac_coords")
        if len(nums) == 0:
            raise C2NPInputError(f"cell {self.material_id!r}: has no atoms")
        if len(nums) != len(frac):
            raise C2NPInputError(f"cell {self.material_id!r}: {len(nums)} species but {len(frac)} positions")
        if not (np.all(np.isfinite(lat)) and np.all(np.isfinite(frac))):
            raise C2NPInputError(f"cell {self.material_id!r}: lattice or coordinates are not finite")
        if np.any(nums < 1) or np.any(nums > 118):
            raise C2NPInputError(f"cell {self.material_id!r}: atomic numbers must be in 1..118")
        volume = float(np.linalg.det(lat))
        if not abs(volume) > 1e-6:
            raise C2NPInputError(f"cell {self.material_id!r}: lattice is singular (volume {volume:.3g} Å³)")
        lat.setflags(write=False)
        nums.setflags(write=False)
        object.__setattr__(self, "lattice_angstrom", lat)
        object.__setattr__(self, "numbers", nums)
        object.__setattr__(self, "frac_coords", frac)

    # --- derived quantities -------------------------------------------------------------
    @property
    def n_atoms(self) -> int:
        """Number of basis atoms."""
        return int(len(self.numbers))

    @property
    def volume_angstrom3(self) -> float:
        """Cell volume in Å³ (positive)."""
        return float(abs(np.linalg.det(self.lattice_angstrom)))

    @property
    def number_density_per_angstrom3(self) -> float:
        """Atoms per Å³."""
        return self.n_atoms / self.volume_angstrom3

    @property
    def cart_coords_angstrom(self) -> np.ndarray:
        """(n, 3) Cartesian positions of the basis atoms in Å."""
        return self.frac_coords @ self.lattice_angstrom

    @property
    def symbols(self) -> list[str]:
        """Chemical symbols of the basis atoms."""
        from ase.data import chemical_symbols

        return [chemical_symbols[int(z)] for z in self.numbers]

    @property
    def formula(self) -> str:
        """Reduced-order Hill-like formula in order of first appearance, e.g. ``KMgH3``."""
        from ase.data import chemical_symbols

        zs, counts = np.unique(self.numbers, return_counts=True)
        order = sorted(range(len(zs)), key=lambda i: list(self.numbers).index(zs[i]))
        g = int(np.gcd.reduce(counts))
        return "".join(
            chemical_symbols[int(zs[i])] + (str(counts[i] // g) if counts[i] // g > 1 else "") for i in order
        )

    def composition(self) -> dict[int, float]:
        """Element fractions {Z: fraction}."""
        zs, counts = np.unique(self.numbers, return_counts=True)
        return {int(z): float(c) / self.n_atoms for z, c in zip(zs, counts)}

    def lattice_parameters(self) -> tuple[float, float, float, float, float, float]:
        """(a, b, c, alpha, beta, gamma) of this cell as given (Å, degrees)."""
        return lattice_parameters(self.lattice_angstrom)

    def with_id(self, material_id: str) -> UnitCell:
        """Copy with another material id."""
        return UnitCell(material_id, self.lattice_angstrom, self.numbers, self.frac_coords)

    # --- conversions --------------------------------------------------------------------
    def to_ase(self) -> Any:
        """As an :class:`ase.Atoms` (periodic)."""
        from ase import Atoms

        return Atoms(numbers=self.numbers, scaled_positions=self.frac_coords,
                     cell=self.lattice_angstrom, pbc=True)

    @classmethod
    def from_ase(cls, atoms: Any, material_id: str) -> UnitCell:
        """From a periodic :class:`ase.Atoms`."""
        return cls(material_id, np.asarray(atoms.cell[:], dtype=float), atoms.numbers,
                   atoms.get_scaled_positions(wrap=False))

    def to_spglib(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The (lattice, positions, numbers) tuple spglib and moyopy take."""
        return (np.array(self.lattice_angstrom), np.array(self.frac_coords), np.array(self.numbers))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "material_id": self.material_id,
            "lattice_angstrom": self.lattice_angstrom.tolist(),
            "numbers": self.numbers.tolist(),
            "frac_coords": self.frac_coords.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UnitCell:
        """Inverse of :meth:`to_dict`."""
        return cls(data["material_id"], data["lattice_angstrom"], data["numbers"], data["frac_coords"])

    def same_as(self, other: UnitCell, *, atol: float = 0.0) -> bool:
        """True when ids, species and (within ``atol``) lattice and coordinates agree."""
        return (self.material_id == other.material_id
                and np.array_equal(self.numbers, other.numbers)
                and np.allclose(self.lattice_angstrom, other.lattice_angstrom, rtol=0, atol=atol)
                and np.allclose(self.frac_coords, other.frac_coords, rtol=0, atol=atol))


def lattice_parameters(lattice_angstrom: np.ndarray) -> tuple[float, float, float, float, float, float]:
    """(a, b, c, alpha, beta, gamma) in Å and degrees of a (3, 3) row-vector lattice: the
    tuple of :meth:`c2np.lattice.LatticeParameters.from_lattice` (kept as a tuple for
    ``solver.py`` until it takes the record)."""
    return tuple(float(v) for v in LatticeParameters.from_lattice(lattice_angstrom).as_array())  # type: ignore[return-value]


# --- CIF ---------------------------------------------------------------------------------
#: Atoms closer than this (Å, periodic images included) make a CIF unphysical (overlapping sites).
MIN_ATOM_DISTANCE_ANGSTROM = 0.5
_SITE_SYMPREC = 1e-3  # fractional distance below which two symmetry images are one site (as ASE)


def read_cif_text(text: str, *, source: str, material_id: str | None = None) -> UnitCell:
    """Parse CIF text (first data block) into a :class:`UnitCell`.

    ``source`` names the file in error messages. Partial occupancy, empty and malformed
    files, impossible cell parameters (non-positive lengths, angles that close no cell) and
    overlapping atoms raise :class:`C2NPInputError`; files beyond the limits ``cif_bytes``
    and ``cell_atoms`` raise :class:`C2NPLimitError` before they are expanded.
    """
    from ase.io.cif import parse_cif

    from c2np.limits import check as check_limit

    check_limit("cif_bytes", len(text), what=source)
    if not text.strip():
        raise C2NPInputError(f"{source}: CIF file is empty")
    try:
        blocks = [b for b in parse_cif(io.StringIO(text)) if b.has_structure()]
    except Exception as exc:  # ASE raises many types on malformed CIF (also in has_structure)
        raise C2NPInputError(f"{source}: not a readable CIF ({type(exc).__name__}: {exc})") from exc
    if not blocks:
        raise C2NPInputError(f"{source}: CIF has no crystal structure (cell and atom sites)")
    block = blocks[0]
    occ = block.get("_atom_site_occupancy")
    if occ is not None:
        try:
            occ_arr = np.asarray([float(str(o).split("(")[0]) for o in occ], dtype=float)
        except ValueError as exc:
            raise C2NPInputError(f"{source}: unreadable _atom_site_occupancy ({exc})") from exc
        bad = np.flatnonzero(np.abs(occ_arr - 1.0) > 1e-3)
        if len(bad):
            raise C2NPInputError(
                f"{source}: partial occupancy at atom site {int(bad[0]) + 1} "
                f"(occupancy {occ_arr[bad[0]]:g}); c2np needs fully ordered structures")
    try:
        atoms, frac = _block_atoms(block, source=source)
    except C2NPInputError:
        raise
    except Exception as exc:
        raise C2NPInputError(f"{source}: could not build a structure ({type(exc).__name__}: {exc})") from exc
    if len(atoms) == 0:
        raise C2NPInputError(f"{source}: CIF has no atoms")
    if not np.all(atoms.pbc) or atoms.cell.rank < 3:
        raise C2NPInputError(f"{source}: CIF does not define a 3D cell")
    _check_no_overlap(atoms, source=source)
    mid = material_id if material_id is not None else Path(source).stem
    try:  # the sites' fractions as expanded, not ASE's Cartesian round trip (CPU-dependent bits)
        return UnitCell(mid, np.asarray(atoms.cell[:], dtype=float), atoms.numbers, frac)
    except C2NPInputError as exc:
        raise C2NPInputError(f"{source}: {exc}") from exc


def _block_atoms(block: Any, *, source: str) -> tuple[Any, np.ndarray]:
    """The conventional cell of a CIF block as ASE ``Atoms`` and the atoms' fractional
    coordinates (n, 3) as expanded (without ASE's Cartesian round trip): the atoms of
    ``block.get_atoms()`` (same atoms, same order), with the symmetry expansion done in O(n)
    per site instead of ASE's O(n^2) comparison of every site with every earlier orbit (a
    10,000-atom P1 file took minutes)."""
    from ase import Atoms

    from c2np.lattice import LatticeParameters
    from c2np.limits import check as check_limit

    cellpar = block.get_cellpar()
    if cellpar is None or not LatticeParameters.from_array(cellpar).is_valid():
        shown = "missing" if cellpar is None else ", ".join(f"{x:g}" for x in cellpar)
        raise C2NPInputError(f"{source}: impossible cell parameters a, b, c, alpha, beta, gamma = "
                             f"{shown} (lengths must be > 0 Å and the angles must close a cell)")
    unsym = block.get_unsymmetrized_structure()
    spacegroup = block.get_spacegroup(True)
    ops = spacegroup.get_symop()
    check_limit("cell_atoms", len(unsym) * len(ops), what=f"{source} ({len(unsym)} sites x {len(ops)} "
                                                          "symmetry operations)")
    sites, kinds = _equivalent_sites(ops, _block_scaled(block, unsym), symprec=_SITE_SYMPREC)
    symbols = unsym.get_chemical_symbols()
    atoms = Atoms([symbols[k] for k in kinds], scaled_positions=sites, cell=unsym.cell, pbc=True)
    return atoms, np.asarray(sites, dtype=float)


def _block_scaled(block: Any, unsym: Any) -> np.ndarray:
    """The listed sites' fractional coordinates (n, 3): as written in the file when it gives
    fractions, so that no Cartesian round trip (whose last bits depend on the BLAS kernel of
    the CPU) enters the cell; from the Cartesian positions otherwise."""
    read = getattr(block, "_get_site_coordinates", None)  # ASE's own reader of the site loop
    coord_type, coords = read() if read is not None else ("cartesian", None)
    if coord_type == "scaled":
        return np.asarray(coords, dtype=float).reshape(-1, 3)
    return np.asarray(unsym.get_scaled_positions(wrap=False), dtype=float)


def _equivalent_sites(ops: Any, scaled: np.ndarray, *,
                      symprec: float) -> tuple[np.ndarray, list[int]]:
    """Every symmetry image of the listed sites, each once: (positions (n, 3) in [0, 1),
    index of the listed site of each). A listed site within ``symprec`` (fractional, per
    axis, periodic) of an image of an earlier site is dropped, as ASE does; images are
    kept in the order of the operations. Uses a hash grid, so the cost is linear in sites."""
    rot = np.array([r for r, _ in ops], dtype=float)
    trans = np.array([t for _, t in ops], dtype=float) % 1.0
    n_bins = max(1, int(np.floor(1.0 / symprec)))
    grid: dict[tuple[int, int, int], list[np.ndarray]] = {}
    offsets = [(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)]

    def near(point: np.ndarray) -> bool:
        key = np.floor((point % 1.0) * n_bins).astype(int) % n_bins
        for off in offsets:
            cell = (key + off) % n_bins
            for other in grid.get((int(cell[0]), int(cell[1]), int(cell[2])), ()):
                diff = point - other
                diff -= np.rint(diff)
                if np.all(np.abs(diff) < symprec):
                    return True
        return False

    def add(point: np.ndarray) -> None:
        key = np.floor((point % 1.0) * n_bins).astype(int) % n_bins
        grid.setdefault((int(key[0]), int(key[1]), int(key[2])), []).append(point)

    sites: list[np.ndarray] = []
    kinds: list[int] = []
    for kind, pos in enumerate(np.asarray(scaled, dtype=float).reshape(-1, 3)):
        if near(pos):
            continue  # equivalent to an image of an earlier site
        # summed in a fixed order (no BLAS: its last bit depends on the CPU), and a fraction
        # that wraps to within 1e-12 below 1 is the site at 0 it stands for
        images = (np.sum(rot * pos[None, None, :], axis=2) + trans) % 1.0
        images[images > 1.0 - 1e-12] = 0.0
        diff = images[:, None, :] - images[None, :, :]
        diff -= np.rint(diff)
        same = np.all(np.abs(diff) < symprec, axis=-1)
        keep: list[int] = []
        for i in range(len(images)):
            if not any(same[i, j] for j in keep):
                keep.append(i)
        for i in keep:
            sites.append(images[i])
            kinds.append(kind)
        for i in keep:
            add(images[i])
    return (np.array(sites) if sites else np.zeros((0, 3))), kinds


def _check_no_overlap(atoms: Any, *, source: str) -> None:
    """Refuse atoms closer than :data:`MIN_ATOM_DISTANCE_ANGSTROM` (periodic images included)."""
    from ase import Atoms
    from ase.geometry import minkowski_reduce
    from ase.neighborlist import neighbor_list

    # the same lattice in its reduced basis: a very skewed or nearly flat cell would make the
    # neighbour search enumerate an enormous number of images
    reduced, _ = minkowski_reduce(atoms.cell[:])
    shortest = float(np.min(np.linalg.norm(reduced, axis=1)))
    if shortest < MIN_ATOM_DISTANCE_ANGSTROM:
        raise C2NPInputError(f"{source}: the lattice has a translation of {shortest:.3g} Å (< "
                             f"{MIN_ATOM_DISTANCE_ANGSTROM} Å): every atom overlaps its own periodic image")
    compact = Atoms(numbers=atoms.numbers, positions=atoms.positions, cell=reduced, pbc=True)
    compact.wrap()
    i, j, d = neighbor_list("ijd", compact, MIN_ATOM_DISTANCE_ANGSTROM)
    if len(d):
        k = int(np.argmin(d))
        raise C2NPInputError(f"{source}: atoms {int(i[k]) + 1} and {int(j[k]) + 1} are {d[k]:.3g} Å apart "
                             f"(< {MIN_ATOM_DISTANCE_ANGSTROM} Å): overlapping sites")


def read_cif(path: str | os.PathLike[str], *, material_id: str | None = None) -> UnitCell:
    """Read the first structure of a CIF file; the material id defaults to the file stem."""
    from c2np.limits import check as check_limit

    p = Path(path)
    try:
        if p.is_file():
            check_limit("cif_bytes", p.stat().st_size, what=str(p))
        text = p.read_text(encoding="utf-8", errors="strict")
    except FileNotFoundError as exc:
        raise C2NPInputError(f"{p}: no such CIF file") from exc
    except (UnicodeDecodeError, IsADirectoryError, PermissionError) as exc:
        raise C2NPInputError(f"{p}: cannot read as text ({exc})") from exc
    return read_cif_text(text, source=str(p), material_id=material_id)


def read_cells(path: str | os.PathLike[str]) -> list[UnitCell]:
    """Read every ``*.cif`` (any case of the suffix) of a folder or a zip archive, sorted by
    material id.

    The material id is the file (member) name without its suffix and must pass the
    safe-name rule (:mod:`c2np.names`); ids equal but for case are refused. Zip members are
    parsed in memory: nothing is extracted to disk, so no member can be written outside
    any folder; members beyond the limit ``cif_bytes`` (uncompressed) are refused before they
    are decompressed.
    """
    from c2np.limits import check as check_limit
    from c2np.names import check_distinct_names, check_safe_name

    p = Path(path)
    cells: list[UnitCell] = []
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() == ".cif" and f.is_file())
        if not files:
            raise C2NPInputError(f"{p}: folder has no *.cif files")
        for f in files:
            _check_cif_name(f.stem, source=str(f))
        cells = [read_cif(f) for f in files]
    elif p.is_file() and zipfile.is_zipfile(p):
        try:
            with zipfile.ZipFile(p) as zf:
                members = sorted((i for i in zf.infolist() if i.filename.lower().endswith(".cif")
                                  and not i.is_dir()), key=lambda i: i.filename)
                if not members:
                    raise C2NPInputError(f"{p}: zip archive has no .cif members")
                check_limit("zip_total_bytes", sum(i.file_size for i in members), what=f"{p} (.cif members)")
                for info in members:
                    source = f"{p}!{info.filename}"
                    stem = Path(info.filename).stem
                    _check_cif_name(stem, source=source)
                    check_limit("cif_bytes", info.file_size, what=f"{source} (uncompressed)")
                    with zf.open(info) as fh:  # read at most the limit, whatever the header says
                        raw = fh.read(int(min(info.file_size, _limit("cif_bytes"))) + 1)
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise C2NPInputError(f"{source}: not UTF-8 text ({exc})") from exc
                    cells.append(read_cif_text(text, source=source, material_id=stem))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as exc:
            raise C2NPInputError(f"{p}: damaged or unsupported zip archive ({exc})") from exc
    elif p.is_file() and p.suffix.lower() == ".cif":
        _check_cif_name(p.stem, source=str(p))
        cells = [read_cif(p)]
    else:
        raise C2NPInputError(f"{p}: expected a folder of CIF files, a .zip of them, or a .cif file")
    ids = [c.material_id for c in cells]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise C2NPInputError(f"{p}: duplicate material ids {dup}")
    check_distinct_names(ids, what=f"{p}: material ids")
    for mid in ids:
        check_safe_name(mid)
    return sorted(cells, key=lambda c: c.material_id)


def _check_cif_name(stem: str, *, source: str) -> None:
    from c2np.names import check_safe_name

    try:
        check_safe_name(stem, what="CIF name (material id)")
    except C2NPInputError as exc:
        raise C2NPInputError(f"{source}: {exc}") from exc


def _limit(name: str) -> float:
    from c2np.limits import effective

    return effective(name)


def write_cif(cell: UnitCell, path: str | os.PathLike[str]) -> Path:
    """Write a CIF atomically (temp file in the same folder, then rename)."""
    from ase.io import write

    p = Path(path)
    with atomic_path(p) as tmp:
        write(tmp, cell.to_ase(), format="cif")
    return p


# --- symmetry ----------------------------------------------------------------------------
_SYSTEM_BOUNDS = ((2, "triclinic"), (15, "monoclinic"), (74, "orthorhombic"), (142, "tetragonal"),
                  (167, "trigonal"), (194, "hexagonal"), (230, "cubic"))
_SYSTEM_LETTER = {"triclinic": "a", "monoclinic": "m", "orthorhombic": "o", "tetragonal": "t",
                  "trigonal": "h", "hexagonal": "h", "cubic": "c"}


def crystal_system(spacegroup: int) -> str:
    """Crystal system name of a space-group number 1..230."""
    if not 1 <= int(spacegroup) <= 230:
        raise C2NPInputError(f"space group {spacegroup} is outside 1..230")
    for upper, name in _SYSTEM_BOUNDS:
        if spacegroup <= upper:
            return name
    raise AssertionError("unreachable")


def bravais_lattice(spacegroup: int) -> str:
    """Bravais lattice (Pearson symbol prefix, e.g. ``cF``, ``hR``) of a space-group number."""
    import spglib

    system = crystal_system(spacegroup)
    hall = _first_hall_number(int(spacegroup))
    sg_type = spglib.get_spacegroup_type(hall)
    assert sg_type is not None, f"spglib has no space-group type for Hall number {hall}"
    symbol = sg_type.international_short
    centring = symbol[0]
    if centring == "R":
        return "hR"
    if centring in "ABC":
        centring = "S" if system in ("monoclinic", "orthorhombic") else centring
    return _SYSTEM_LETTER[system] + centring


@functools.lru_cache(maxsize=1)
def _hall_table() -> dict[int, int]:
    """Space-group number -> its first (default-setting) Hall number."""
    import spglib

    table: dict[int, int] = {}
    for hall in range(1, 531):
        sg_type = spglib.get_spacegroup_type(hall)
        assert sg_type is not None, f"spglib has no space-group type for Hall number {hall}"
        table.setdefault(int(sg_type.number), hall)
    return table


def _first_hall_number(spacegroup: int) -> int:
    return _hall_table()[spacegroup]


@dataclass(frozen=True)
class StandardCell:
    """The standardized conventional cell of a crystal (the task-2 target, contract §2).

    Attributes:
        spacegroup: international space-group number 1..230.
        international: Hermann-Mauguin short symbol.
        crystal_system: e.g. ``cubic``.
        bravais: Pearson-style Bravais lattice, e.g. ``cP``.
        parameters: conventional lattice parameters a, b, c (Å), alpha, beta, gamma (degrees).
        lattice_angstrom: (3, 3) conventional lattice rows.
        numbers, frac_coords: conventional basis.
        symprec_angstrom: tolerance used.
        library, library_version: who computed it.
    """

    spacegroup: int
    international: str
    crystal_system: str
    bravais: str
    parameters: LatticeParameters
    lattice_angstrom: tuple[tuple[float, float, float], ...] = field(repr=False)
    numbers: tuple[int, ...] = field(repr=False)
    frac_coords: tuple[tuple[float, float, float], ...] = field(repr=False)
    symprec_angstrom: float = 1e-3
    library: str = "spglib"
    library_version: str = ""

    @property
    def lattice_params(self) -> tuple[float, float, float, float, float, float]:
        """(a, b, c, alpha, beta, gamma) of :attr:`parameters` as a tuple."""
        return tuple(float(v) for v in self.parameters.as_array())  # type: ignore[return-value]

    def to_unit_cell(self, material_id: str) -> UnitCell:
        """The conventional cell as a :class:`UnitCell`."""
        return UnitCell(material_id, np.asarray(self.lattice_angstrom), np.asarray(self.numbers),
                        np.asarray(self.frac_coords))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (lists instead of tuples)."""
        from dataclasses import asdict

        d = asdict(self)
        d.update(d.pop("parameters"))  # flat a_angstrom ... gamma_deg, as before
        d["lattice_angstrom"] = [list(r) for r in self.lattice_angstrom]
        d["frac_coords"] = [list(r) for r in self.frac_coords]
        d["numbers"] = list(self.numbers)
        return d


def standardize(cell: UnitCell | tuple[np.ndarray, np.ndarray, np.ndarray], *,
                symprec_angstrom: float = 1e-3, angle_tolerance_deg: float = -1.0) -> StandardCell:
    """Standardized conventional cell via spglib (``get_symmetry_dataset``).

    Raises :class:`C2NPInputError` when spglib finds no symmetry (e.g. overlapping atoms).
    """
    import spglib

    if isinstance(cell, UnitCell):
        spg_cell = cell.to_spglib()
        name = cell.material_id
    else:
        spg_cell = tuple(np.asarray(x) for x in cell)  # type: ignore[assignment]
        name = "cell"
    try:
        # spglib annotates the cell as nested Sequences; it takes (and documents) NumPy arrays
        ds = spglib.get_symmetry_dataset(spg_cell, symprec=symprec_angstrom,  # type: ignore[arg-type]
                                         angle_tolerance=angle_tolerance_deg)
    except Exception as exc:  # spglib >= 2.5 may raise instead of returning None
        raise C2NPInputError(f"{name}: spglib failed at symprec {symprec_angstrom} Å ({exc})") from exc
    if ds is None:
        raise C2NPInputError(f"{name}: spglib found no symmetry at symprec {symprec_angstrom} Å "
                             f"({spglib.get_error_message()})")
    lat = np.asarray(ds.std_lattice, dtype=float)
    number = int(ds.number)
    return StandardCell(
        spacegroup=number,
        international=str(ds.international),
        crystal_system=crystal_system(number),
        bravais=bravais_lattice(number),
        parameters=LatticeParameters.from_lattice(lat),
        lattice_angstrom=cast(tuple[tuple[float, float, float], ...],
                              tuple(tuple(float(x) for x in row) for row in lat)),
        numbers=tuple(int(z) for z in ds.std_types),
        frac_coords=cast(tuple[tuple[float, float, float], ...],
                         tuple(tuple(float(x) for x in row) for row in np.asarray(ds.std_positions))),
        symprec_angstrom=float(symprec_angstrom),
        library="spglib",
        library_version=str(spglib.__version__),
    )
