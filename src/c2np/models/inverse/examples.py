"""The training data of a task-2 crystal generator (torch-free): a particle's descriptor
paired with its material's standardized primitive cell (:class:`CellExample`), the training
pairs of a :class:`~c2np.tasks.ForwardTask` (:func:`training_pairs`) and the space-group
templates of its training cells (:func:`build_templates`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from c2np.cells import UnitCell
from c2np.errors import C2NPInputError
from c2np.models.inverse.templates import CellTemplate, merge_templates, template_of
from c2np.particle import Particle
from c2np.particle_descriptor import N_SLOTS, ParticleDescriptor, describe
from c2np.tasks import ForwardTask

__all__ = ["CellExample", "cell_example", "training_pairs", "build_templates", "composition_key"]


@dataclass(frozen=True, eq=False)
class CellExample:
    """One training pair: descriptor of a particle and the spglib standardized primitive cell
    of its material (lattice (3, 3) Å, frac (n, 3), slot of each atom (n,)), with the cell's
    space-group number (spglib on the slotted cell, as :func:`~c2np.models.inverse.templates.template_of`;
    0: not known)."""

    descriptor: ParticleDescriptor
    lattice_angstrom: np.ndarray
    frac: np.ndarray
    slots: np.ndarray
    spacegroup: int = 0


def cell_example(descriptor: ParticleDescriptor, cell: UnitCell, *, symprec_angstrom: float = 1e-3
                 ) -> CellExample:
    """The training pair of a training cell (its standardized primitive cell, spglib)."""
    import spglib

    # spglib annotates the cell as nested Sequences; it takes (and documents) NumPy arrays
    std = spglib.standardize_cell(cell.to_spglib(), to_primitive=True, no_idealize=False,  # type: ignore[arg-type]
                                  symprec=symprec_angstrom)
    assert std is not None, f"{cell.material_id}: spglib could not standardize the cell"
    lat_raw, frac_raw, nums = std
    slot_by_z = {int(z): int(s) for z, s in zip(descriptor.numbers, descriptor.slot_of)}
    slots = np.array([slot_by_z.get(int(z), N_SLOTS - 1) for z in nums], dtype=np.int64)
    order = np.argsort(slots, kind="stable")
    lat = np.asarray(lat_raw, dtype=np.float64)
    frac = np.asarray(frac_raw, dtype=np.float64)[order] % 1.0
    slots = slots[order]
    ds = spglib.get_symmetry_dataset((lat, frac, slots + 1), symprec=symprec_angstrom)  # type: ignore[arg-type]
    return CellExample(descriptor, lat, frac, slots, int(ds.number) if ds is not None else 0)


def training_pairs(task: ForwardTask, *, seed: int = 0, noisy_copies: int = 0,
                   max_noise_angstrom: float = 0.06) -> list[CellExample]:
    """The generator's training pairs from a task's training examples (one rotation per
    (material, R); under protocol ``strict`` never a held-out material, checked here).

    Per training particle: (1) as stored; (2) the training cell re-carved about a random
    centre (same R and rotation) with isotropic Gaussian noise of a sigma uniform in
    [0, ``max_noise_angstrom``]; (3) ``noisy_copies`` copies of the stored particle with
    noise of a sigma uniform in [0.01, ``max_noise_angstrom``]. This is augmentation of the
    *training* data (the carve here makes inputs, never a generated answer). Seeded by
    ``numpy.random.default_rng(seed)``."""
    from c2np.carving import carve

    held = set(task.heldout_materials)
    rng = np.random.default_rng(seed)
    out = []
    for q, part in task.training_examples(rotations_per_group=1):
        if q.cell.material_id in held:
            raise C2NPInputError(f"{q.cell.material_id}: a held-out material among the training examples")
        rc = carve(q.cell, q.radius_angstrom, centre_frac=rng.random(3), quaternion=q.quaternion).particle
        out.append(cell_example(describe(part), q.cell))
        pos = rc.positions_angstrom + rng.normal(scale=rng.uniform(0, max_noise_angstrom),
                                                 size=rc.positions_angstrom.shape)
        out.append(cell_example(describe(Particle(rc.numbers, pos)), q.cell))
        for _ in range(noisy_copies):
            pos = part.positions_angstrom + rng.normal(scale=rng.uniform(0.01, max_noise_angstrom),
                                                       size=part.positions_angstrom.shape)
            out.append(cell_example(describe(Particle(part.numbers, pos)), q.cell))
    return out


def build_templates(task: ForwardTask) -> list[CellTemplate]:
    """The distinct templates of a ForwardTask's training cells (one per training material,
    its first training example giving the slot of each species; under protocol ``strict``
    never a held-out material, checked)."""
    held = set(task.heldout_materials)
    seen: set[str] = set()
    found = []
    for q, part in task.training_examples(rotations_per_group=1):
        mid = q.cell.material_id
        if mid in held:
            raise C2NPInputError(f"{mid}: a held-out material among the training examples")
        if mid in seen:
            continue
        seen.add(mid)
        ex = cell_example(describe(part), q.cell)
        found.append(template_of(ex.lattice_angstrom, ex.frac, ex.slots, mid))
    return merge_templates(found)



def composition_key(slots: np.ndarray) -> tuple[int, ...]:
    """The composition of a cell: its number of atoms per species slot (``N_SLOTS`` counts)."""
    return tuple(int(np.sum(slots == k)) for k in range(N_SLOTS))
