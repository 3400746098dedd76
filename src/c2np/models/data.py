"""Data plumbing of the learned models (torch-free).

Models and training depend only on a *store-like* object with the attributes of
``c2np.store.DatasetStore``: ``recipes`` (a :class:`~c2np.splits.RecipeTable`), ``cells``
(dict material -> :class:`~c2np.cells.UnitCell`) and ``particle(row)``. Until the HDF5 store
is available, :class:`InMemoryDataset` provides the same attributes from
``build_recipes`` + ``carve``.

The leak-free guarantee of task 1 lives here: :func:`condition_for_row` builds a
:class:`Condition` from the recipe table and the unit cell only (cell, R, rotation). It never
touches ``particle(row)``, so a generator cannot see the target positions or atom count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast
from typing import Protocol as TypingProtocol

import numpy as np

from c2np.carving import carve, rotate_positions
from c2np.cells import UnitCell
from c2np.errors import C2NPInputError
from c2np.particle import Particle
from c2np.splits import RecipeTable, build_recipes, get_protocol, no_training_rows_message
from c2np.tasks import example_rows, inverse_target

__all__ = ["StoreLike", "InMemoryDataset", "Condition", "condition_for_row", "condition_from_query", "select_rows",
           "TrainingRows", "training_rows",
           "lattice_target", "demo_cells", "MAX_SPECIES_SLOTS", "species_slots"]

MAX_SPECIES_SLOTS = 8


class StoreLike(TypingProtocol):
    """What models need from a dataset store."""

    recipes: RecipeTable
    cells: dict[str, UnitCell]

    def particle(self, row: int) -> Particle: ...


class InMemoryDataset:
    """A dataset built in memory: recipes from ``build_recipes``, particles carved on demand.

    Base (unrotated) particles are cached per (material, R) and rotated per row, exactly as
    the binary store does. :attr:`fingerprint` is the store's fingerprint (contract §5) of the
    same cells and recipes, computed on first use (it carves every base particle), so a run
    trained on an in-memory dataset and the HDF5 store built from the same cells match.
    """

    def __init__(self, cells: Sequence[UnitCell], protocol: str = "paper", *,
                 radii_angstrom: Sequence[int] | None = None) -> None:
        self.recipes: RecipeTable = build_recipes(list(cells), protocol, radii_angstrom=radii_angstrom)
        self.cells: dict[str, UnitCell] = {c.material_id: c for c in cells}
        self._cell_list = list(cells)
        self._fingerprint: str | None = None
        self._base: dict[tuple[str, int], Particle] = {}

    @property
    def fingerprint(self) -> str:
        """SHA-256 fingerprint of the cells, recipes and base particles (as the HDF5 store's)."""
        if self._fingerprint is None:
            from c2np.store import carve_base_particles, fingerprint

            base = carve_base_particles(self._cell_list, self.recipes)
            rec = self.recipes
            for j in range(len(base.material_index)):
                nums, pos = base.get(j)
                key = (rec.materials[int(base.material_index[j])], int(base.radius_angstrom[j]))
                self._base.setdefault(key, Particle(nums, pos))
            self._fingerprint = fingerprint(self._cell_list, rec, base)
        return self._fingerprint

    def base_particle(self, material: str, radius: int) -> Particle:
        """Unrotated particle of ``material`` at radius R (Å), canonical order."""
        key = (material, int(radius))
        if key not in self._base:
            self._base[key] = carve(self.cells[material], float(radius),
                                    centre_frac=self.recipes.centre_frac).particle
        return self._base[key]

    def particle(self, row: int) -> Particle:
        """The particle of recipe ``row`` (rotated by its quaternion)."""
        rec = self.recipes
        base = self.base_particle(rec.materials[rec.material_index[row]], int(rec.radius_angstrom[row]))
        return Particle(base.numbers, rotate_positions(base.positions_angstrom, rec.quaternion[row]))

    def sample_id(self, row: int) -> str:
        """Sample id of ``row``."""
        return self.recipes.sample_id(row)


@dataclass(frozen=True, eq=False)
class Condition:
    """Everything a task-1 generator may see: the unit cell, R (Å), the rotation
    (scalar-last quaternion, (4,)) and the carving centre (fractional coordinates of the cell,
    (3,)). Never the target particle or its atom count."""

    cell: UnitCell
    radius_angstrom: float
    quaternion: np.ndarray
    centre_frac: tuple[float, float, float] = (0.0, 0.0, 0.0)


def condition_for_row(store: Any, row: int) -> Condition:
    """The task-1 input of recipe ``row``, from ``store.recipes`` and ``store.cells`` only."""
    rec = store.recipes
    material = rec.materials[int(rec.material_index[row])]
    if material not in store.cells:
        raise C2NPInputError(f"store has no unit cell for material {material!r}")
    return Condition(cell=store.cells[material], radius_angstrom=float(rec.radius_angstrom[row]),
                     quaternion=np.array(rec.quaternion[row], dtype=np.float64),
                     centre_frac=cast(tuple[float, float, float], tuple(float(x) for x in rec.centre_frac)))


def condition_from_query(query: Any) -> Condition:
    """The generator input of a :class:`c2np.tasks.ForwardQuery` (its fields without the id)."""
    return Condition(cell=query.cell, radius_angstrom=float(query.radius_angstrom),
                     quaternion=np.array(query.quaternion, dtype=np.float64),
                     centre_frac=cast(tuple[float, float, float], tuple(float(x) for x in query.centre_frac)))


def species_slots(cell: UnitCell) -> np.ndarray:
    """(k,) sorted distinct atomic numbers of a cell; a particle's atom types are indices into it."""
    zs = np.unique(cell.numbers)
    if len(zs) > MAX_SPECIES_SLOTS:
        raise C2NPInputError(f"cell {cell.material_id!r} has {len(zs)} species; the models support "
                             f"at most {MAX_SPECIES_SLOTS}")
    return zs


def select_rows(store: Any, split: str, *, max_radius_angstrom: float | None = None,
                per_group: int | None = None, materials: Sequence[str] | None = None) -> np.ndarray:
    """Rows of ``split`` (sorted) of ``materials`` (None = all), optionally with
    R <= ``max_radius_angstrom`` and at most ``per_group`` rows (lowest rotation indices) per
    (material, R). A split that has rows but none under the radius limit is an error
    (:class:`C2NPInputError` naming the radii present), never a silent fallback."""
    rec = store.recipes
    rows = np.flatnonzero(rec.mask(split))
    if materials is not None:
        unknown = sorted(set(materials) - set(rec.materials))
        if unknown:
            raise C2NPInputError(f"unknown materials {unknown}")
        idx = [rec.materials.index(m) for m in materials]
        rows = rows[np.isin(rec.material_index[rows], idx)]
    rows = _under_limit(rec, rows, split, max_radius_angstrom)
    if per_group is not None and len(rows):
        order = np.lexsort((rec.rotation_index[rows], rec.radius_angstrom[rows], rec.material_index[rows]))
        rows = rows[order]
        keys = rec.material_index[rows].astype(np.int64) * 1000 + rec.radius_angstrom[rows]
        rank = np.zeros(len(rows), dtype=np.int64)
        for i in range(1, len(rows)):
            rank[i] = rank[i - 1] + 1 if keys[i] == keys[i - 1] else 0
        rows = np.sort(rows[rank < per_group])
    return rows


@dataclass(frozen=True)
class TrainingRows:
    """The rows a training run may fit on: ``train`` and ``val`` (sorted recipe rows), the
    materials and radii (Å) they cover, and the held-out materials they exclude."""

    train: np.ndarray
    val: np.ndarray
    train_materials: tuple[str, ...]
    val_materials: tuple[str, ...]
    train_radii_angstrom: tuple[int, ...]
    val_radii_angstrom: tuple[int, ...]
    heldout_materials: tuple[str, ...]

    def summary(self) -> dict[str, Any]:
        """JSON-ready description (counts, materials, radii)."""
        return {"train_materials": list(self.train_materials), "val_materials": list(self.val_materials),
                "train_radii": list(self.train_radii_angstrom), "val_radii": list(self.val_radii_angstrom),
                "heldout_materials": list(self.heldout_materials),
                "n_train_rows": int(len(self.train)), "n_val_rows": int(len(self.val))}


def _materials_of(rec: RecipeTable, rows: np.ndarray) -> tuple[str, ...]:
    return tuple(sorted({rec.materials[int(i)] for i in rec.material_index[rows]}))


def _radii_of(rec: RecipeTable, rows: np.ndarray) -> tuple[int, ...]:
    return tuple(int(r) for r in np.unique(rec.radius_angstrom[rows]))


def _under_limit(rec: RecipeTable, rows: np.ndarray, split: str, max_radius_angstrom: float | None) -> np.ndarray:
    """``rows`` with R <= the limit; rows but none under it is an error naming the radii."""
    if max_radius_angstrom is None or len(rows) == 0:
        return rows
    keep = rec.radius_angstrom[rows] <= max_radius_angstrom
    if not np.any(keep):
        present = ", ".join(str(int(r)) for r in np.unique(rec.radius_angstrom[rows]))
        raise C2NPInputError(f"split {split!r} has no rows with R <= {max_radius_angstrom:g} Å (its radii: "
                             f"{present} Å); raise max_train_radius_angstrom")
    return rows[keep]


def training_rows(store: Any, *, max_radius_angstrom: float | None) -> TrainingRows:
    """Train and validation rows of a store for fitting a model: the ``train`` and ``val``
    examples of :func:`c2np.tasks.example_rows` (the one rule: never a held-out material; under
    ``strict`` the validation radii are their own split, so training never sees them) under
    the radius limit. No training or no validation rows is an error (:class:`C2NPInputError`)."""
    rec = store.recipes
    held = tuple(rec.heldout_materials)
    train = _under_limit(rec, example_rows(rec, "train"), "train", max_radius_angstrom)
    if len(train) == 0:
        raise C2NPInputError(no_training_rows_message(
            get_protocol(rec.protocol), np.unique(rec.radius_angstrom), n_materials=len(rec.materials),
            n_heldout_materials=len(held)))
    val = _under_limit(rec, example_rows(rec, "val"), "val", max_radius_angstrom)
    if len(val) == 0:
        raise C2NPInputError(f"the store has no validation rows (protocol {rec.protocol!r}); a run "
                             "needs them for validation loss, fidelity and checkpoint selection")
    out = TrainingRows(train=train, val=val, train_materials=_materials_of(rec, train),
                       val_materials=_materials_of(rec, val), train_radii_angstrom=_radii_of(rec, train),
                       val_radii_angstrom=_radii_of(rec, val), heldout_materials=held)
    overlap = set(out.train_radii_angstrom) & set(get_protocol(rec.protocol).val_radii_angstrom)
    if overlap or set(held) & (set(out.train_materials) | set(out.val_materials)):
        raise C2NPInputError(f"training rows overlap the held-out radii {sorted(overlap)} or materials")
    return out


def lattice_target(cell: UnitCell) -> tuple[np.ndarray, int]:
    """Task-2 target of a cell as arrays: (6,) a, b, c (Å), alpha, beta, gamma (deg) and the
    space-group number of :func:`c2np.tasks.inverse_target` (the one definition)."""
    target = inverse_target(cell)
    return target.params, int(target.spacegroup)


def demo_cells() -> list[UnitCell]:
    """Four small synthetic ABH3 perovskite cells (cubic, tetragonal, orthorhombic-like
    distortions) for tests and quick benchmarks when no catalog is at hand. Lattice constants
    are plausible but not relaxed; they are toy inputs, not a catalog."""
    frac = np.array([[0, 0, 0], [0.5, 0.5, 0.5], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]], float)
    out = [
        UnitCell("KMgH3", np.diag([4.02, 4.02, 4.02]), np.array([19, 12, 1, 1, 1]), frac),
        UnitCell("NaMgH3", np.diag([3.86, 3.86, 3.86]), np.array([11, 12, 1, 1, 1]), frac),
        UnitCell("RbCaH3", np.diag([4.45, 4.45, 4.68]), np.array([37, 20, 1, 1, 1]), frac),
        UnitCell("CsSrH3", np.diag([4.70, 4.95, 5.20]), np.array([55, 38, 1, 1, 1]), frac),
    ]
    return out
