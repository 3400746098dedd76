"""The dataset store (contract §5): recipes plus each (material, R) base particle, in one HDF5 file.

A dataset is its unit cells plus its recipe table; the particles are a pure function of
those. The store keeps each (material, R) *base* particle (unrotated, canonical order,
float32 positions concatenated with offsets) once; a sample's particle is its base particle
rotated by the sample's quaternion, computed on read.

Layout (format ``c2np-store`` version 1)::

    /                attrs: format, format_version, c2np_version, protocol, fingerprint,
                            source ("carved" | "imported-original"), centre_frac, summary
    /cells           material_ids (m,), lattice (m,3,3) f8, atom_offsets (m+1,), numbers, frac
    /recipes         material_index, radius, rotation_index (n,) i4, quaternion (n,4) f8, split (n,) i1
                     attrs: heldout_materials (JSON)
    /base            material_index, radius (k,) i4, offsets (k+1,) i8, numbers (N,) u1,
                     positions (N,3) f4, boundary_margin (k,) f8, paper_supercell_clips (k,) bool
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from c2np.cells import UnitCell
from c2np.errors import C2NPInputError, C2NPStoreError
from c2np.particle import Particle
from c2np.splits import RecipeTable

__all__ = ["FORMAT", "FORMAT_VERSION", "FINGERPRINT_DECIMALS", "Sample", "BaseParticles",
           "quaternions_to_matrices", "fingerprint", "check_store_names"]


FORMAT = "c2np-store"
FORMAT_VERSION = 1
FINGERPRINT_DECIMALS = 5  # base positions are hashed rounded to 1e-5 Å


@dataclass(frozen=True, eq=False)
class Sample:
    """One benchmark sample: its recipe and its (rotated, centred) particle."""

    row: int
    sample_id: str
    material: str
    radius_angstrom: int
    rotation_index: int
    quaternion: np.ndarray
    split: str
    particle: Particle


@dataclass(frozen=True, eq=False)
class BaseParticles:
    """Every (material, R) base particle, concatenated.

    Attributes:
        material_index, radius_angstrom: (k,) keys.
        offsets: (k+1,) int64; particle j is ``numbers[offsets[j]:offsets[j+1]]``.
        numbers: (N,) atomic numbers.
        positions_angstrom: (N, 3) unrotated centred positions (float64 when carved here,
            float32 when read from a store).
        boundary_margin_angstrom, paper_supercell_clips: (k,) carve diagnostics.
    """

    material_index: np.ndarray
    radius_angstrom: np.ndarray
    offsets: np.ndarray
    numbers: np.ndarray
    positions_angstrom: np.ndarray
    boundary_margin_angstrom: np.ndarray
    paper_supercell_clips: np.ndarray

    def index(self) -> dict[tuple[int, int], int]:
        """(material_index, radius) -> position j in these arrays."""
        return {(int(m), int(r)): j for j, (m, r) in enumerate(zip(self.material_index, self.radius_angstrom))}

    def get(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """(numbers, positions) of base particle j."""
        a, b = int(self.offsets[j]), int(self.offsets[j + 1])
        return self.numbers[a:b], self.positions_angstrom[a:b]


def quaternions_to_matrices(quaternion: np.ndarray) -> np.ndarray:
    """(n, 4) scalar-last unit quaternions -> (n, 3, 3) rotation matrices (vectorised)."""
    q = np.asarray(quaternion, dtype=np.float64).reshape(-1, 4)
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    m = np.empty((len(q), 3, 3))
    m[:, 0, 0] = 1 - 2 * (y * y + z * z)
    m[:, 0, 1] = 2 * (x * y - z * w)
    m[:, 0, 2] = 2 * (x * z + y * w)
    m[:, 1, 0] = 2 * (x * y + z * w)
    m[:, 1, 1] = 1 - 2 * (x * x + z * z)
    m[:, 1, 2] = 2 * (y * z - x * w)
    m[:, 2, 0] = 2 * (x * z - y * w)
    m[:, 2, 1] = 2 * (y * z + x * w)
    m[:, 2, 2] = 1 - 2 * (x * x + y * y)
    return m


def _cells_bytes(cells: Sequence[UnitCell]) -> bytes:
    parts = []
    for c in cells:
        parts.append(c.material_id.encode() + b"\0")
        parts.append(np.ascontiguousarray(c.lattice_angstrom, dtype="<f8").tobytes())
        parts.append(np.ascontiguousarray(c.numbers, dtype="<i8").tobytes())
        parts.append(np.ascontiguousarray(c.frac_coords, dtype="<f8").tobytes())
    return b"".join(parts)


def fingerprint(cells: Sequence[UnitCell], table: RecipeTable, base: BaseParticles) -> str:
    """SHA-256 over the unit cells, the recipe table and every base particle's species and
    positions rounded to 1e-5 Å (contract §5). Hex digest."""
    h = hashlib.sha256()
    h.update(b"c2np-fingerprint-v1\0")
    h.update(_cells_bytes(cells))
    h.update(table.canonical_bytes())
    for j in range(len(base.material_index)):
        nums, pos = base.get(j)
        h.update(np.array([base.material_index[j], base.radius_angstrom[j], len(nums)], dtype="<i8").tobytes())
        h.update(np.ascontiguousarray(nums, dtype="<i8").tobytes())
        rounded = np.rint(np.asarray(pos, dtype=np.float64) * 10 ** FINGERPRINT_DECIMALS).astype("<i8")
        h.update(rounded.tobytes())
    return h.hexdigest()


def check_store_names(material_ids: Sequence[str], *, source: str) -> None:
    """The safe-name rule (:mod:`c2np.names`) for every material id of a store; ids equal
    but for case are refused too (they would share a folder on export)."""
    from c2np.names import check_distinct_names, check_safe_name

    try:
        for mid in material_ids:
            check_safe_name(mid)
        check_distinct_names(material_ids)
    except C2NPInputError as exc:
        raise C2NPStoreError(f"{source}: {exc}") from exc
