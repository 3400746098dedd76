"""Writing a single-file store: the base particles carved from the cells
(:func:`carve_base_particles`) and the HDF5 file of :mod:`c2np.store.layout`, written to a
temporary file in the target folder that is renamed at the end, so an interrupted build
never leaves a half-written store."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from c2np.carving import carve
from c2np.cells import UnitCell
from c2np.executor import Context, Executor, LocalExecutor, same
from c2np.fileio import atomic_path
from c2np.splits import RecipeTable
from c2np.store.layout import FORMAT, FORMAT_VERSION, BaseParticles, check_store_names, fingerprint
from c2np.version import __version__

__all__ = ["carve_base_particles", "write_store"]


def _carve_pair(centre_frac: tuple[float, float, float],
                item: tuple[UnitCell, int]) -> tuple[np.ndarray, np.ndarray, float, bool]:
    """One base particle: (numbers, positions Å, boundary margin Å, paper supercell clips)."""
    cell, r = item
    res = carve(cell, r, centre_frac=centre_frac)
    return (res.particle.numbers, res.particle.positions_angstrom, res.boundary_margin_angstrom,
            bool(res.paper_supercell_clips))


def carve_base_particles(cells: Sequence[UnitCell], table: RecipeTable, *,
                         progress: bool = False, executor: Executor | None = None,
                         chunk: int = 4) -> BaseParticles:
    """Carve every (material, R) pair that the recipe table uses (float64 positions), in
    this process or through ``executor`` (:mod:`c2np.executor`; the result does not
    depend on it)."""
    pairs = sorted({(int(m), int(r)) for m, r in zip(table.material_index, table.radius_angstrom)})
    by_id = {c.material_id: c for c in cells}
    nums: list[np.ndarray] = []
    poss: list[np.ndarray] = []
    margins = np.zeros(len(pairs))
    clips = np.zeros(len(pairs), dtype=bool)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pairs), desc="carving base particles", unit="particle")
    ex = executor if executor is not None else LocalExecutor(1)
    items = [(by_id[table.materials[mi]], r) for mi, r in pairs]
    centre = tuple(float(x) for x in table.centre_frac)
    j = 0
    for part in ex.map(_carve_pair, items, context=Context(same, (centre,), value=centre),
                       chunk=chunk):
        for n, x, margin, clip in part:
            nums.append(n)
            poss.append(x)
            margins[j] = margin
            clips[j] = clip
            j += 1
        if bar is not None:
            bar.update(len(part))
    if bar is not None:
        bar.close()
    offsets = np.zeros(len(pairs) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(n) for n in nums])
    return BaseParticles(
        material_index=np.array([p[0] for p in pairs], dtype=np.int32),
        radius_angstrom=np.array([p[1] for p in pairs], dtype=np.int32),
        offsets=offsets,
        numbers=np.concatenate(nums).astype(np.int64) if nums else np.zeros(0, np.int64),
        positions_angstrom=np.concatenate(poss) if poss else np.zeros((0, 3)),
        boundary_margin_angstrom=margins,
        paper_supercell_clips=clips,
    )


def write_store(path: str | os.PathLike[str], cells: Sequence[UnitCell], table: RecipeTable,
                base: BaseParticles, *, source: str = "carved",
                extra_attrs: dict[str, Any] | None = None) -> Path:
    """Write a store atomically (temp file, then rename). Returns the path."""
    return _write_h5(path, cells, table, base, fingerprint(cells, table, base), source=source,
                     extra_attrs=extra_attrs)


def _write_h5(path: str | os.PathLike[str], cells: Sequence[UnitCell], table: RecipeTable,
              base: BaseParticles, fp: str, *, source: str = "carved",
              extra_attrs: dict[str, Any] | None = None) -> Path:
    """:func:`write_store` with the fingerprint ``fp`` already computed."""
    import h5py

    p = Path(path)
    check_store_names([c.material_id for c in cells], source=str(p))
    p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(p) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = FORMAT_VERSION
        f.attrs["c2np_version"] = __version__
        f.attrs["protocol"] = table.protocol
        f.attrs["source"] = source
        f.attrs["centre_frac"] = np.asarray(table.centre_frac, dtype=float)
        f.attrs["summary"] = json.dumps(table.summary, default=float)
        for k, v in (extra_attrs or {}).items():
            f.attrs[k] = v
        g = f.create_group("cells")
        g.create_dataset("material_ids", data=np.array([c.material_id for c in cells], dtype="S"))
        g.create_dataset("lattice", data=np.stack([c.lattice_angstrom for c in cells]))
        offs = np.zeros(len(cells) + 1, dtype=np.int64)
        offs[1:] = np.cumsum([c.n_atoms for c in cells])
        g.create_dataset("atom_offsets", data=offs)
        g.create_dataset("numbers", data=np.concatenate([c.numbers for c in cells]).astype(np.int16))
        g.create_dataset("frac", data=np.concatenate([c.frac_coords for c in cells]))
        r = f.create_group("recipes")
        r.attrs["materials"] = json.dumps(list(table.materials))
        r.attrs["heldout_materials"] = json.dumps(list(table.heldout_materials))
        r.create_dataset("material_index", data=table.material_index.astype(np.int32))
        r.create_dataset("radius", data=table.radius_angstrom.astype(np.int32))
        r.create_dataset("rotation_index", data=table.rotation_index.astype(np.int32))
        r.create_dataset("quaternion", data=table.quaternion.astype(np.float64))
        r.create_dataset("split", data=table.split.astype(np.int8))
        b = f.create_group("base")
        b.create_dataset("material_index", data=base.material_index.astype(np.int32))
        b.create_dataset("radius", data=base.radius_angstrom.astype(np.int32))
        b.create_dataset("offsets", data=base.offsets.astype(np.int64))
        b.create_dataset("numbers", data=base.numbers.astype(np.uint8), compression="gzip",
                         compression_opts=4, shuffle=True)
        b.create_dataset("positions", data=np.asarray(base.positions_angstrom, dtype=np.float32),
                         compression="gzip", compression_opts=4, shuffle=True)
        b.create_dataset("boundary_margin", data=base.boundary_margin_angstrom.astype(np.float64))
        b.create_dataset("paper_supercell_clips", data=base.paper_supercell_clips.astype(bool))
        # Written last: a store without it was interrupted.
        f.attrs["fingerprint"] = fp
    return p
