"""Reading a store (:class:`DatasetStore`): one HDF5 file, or the manifest of a sharded
store whose shards are checked and joined into one store, the same as the single file of the
same build; every size a file declares is checked against the limits before it is read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from c2np.carving import normalise_quaternions
from c2np.cells import UnitCell
from c2np.errors import C2NPInputError, C2NPStoreError
from c2np.particle import Particle
from c2np.splits import SPLITS, RecipeTable
from c2np.store.layout import (
    FORMAT,
    FORMAT_VERSION,
    BaseParticles,
    Sample,
    check_store_names,
    quaternions_to_matrices,
)
from c2np.store.manifest import Manifest

__all__ = ["DatasetStore", "check_declared_sizes"]


_REQUIRED = {
    "cells": ("material_ids", "lattice", "atom_offsets", "numbers", "frac"),
    "recipes": ("material_index", "radius", "rotation_index", "quaternion", "split"),
    "base": ("material_index", "radius", "offsets", "numbers", "positions", "boundary_margin",
             "paper_supercell_clips"),
}



def check_declared_sizes(f: Any, names: Sequence[str], *, source: str, limit: str) -> float:
    """Refuse an HDF5 file whose arrays declare more than the limit ``limit`` (bytes, shape x
    item size, summed) or, per array, far more than the file stores (limit
    ``store_compression_ratio``: a tiny file declaring huge arrays) — before reading any."""
    from c2np.limits import check as check_limit
    from c2np.limits import effective

    total = 0.0
    ratio = effective("store_compression_ratio")
    for name in names:
        ds = f[name]
        declared = float(np.prod(ds.shape, dtype=np.float64)) * ds.dtype.itemsize
        total += declared
        stored = float(ds.id.get_storage_size())
        if declared > ratio * stored + (1 << 20):
            check_limit("store_compression_ratio", declared / max(stored, 1.0),
                        what=f"{source}: /{name} declares {declared:,.0f} bytes but the file holds "
                             f"{stored:,.0f} for it")
    check_limit(limit, total, what=f"{source}: declared array sizes")
    return total


@dataclass(eq=False)
class DatasetStore:
    """A dataset store loaded into memory (read-only). Open with :meth:`open`.

    Attributes:
        path: the file.
        protocol: protocol name.
        source: "carved" or "imported-original".
        fingerprint: SHA-256 hex digest recorded at build time.
        cells: material id -> :class:`UnitCell`.
        recipes: the :class:`RecipeTable`.
        base: the :class:`BaseParticles` (float32 positions).
        manifest: the :class:`~c2np.store.manifest.Manifest` of a sharded store (``path`` is
            then the manifest file), None for a single file.
        shard_paths: the shard files of a sharded store, in order.
    """

    path: Path
    protocol: str
    source: str
    fingerprint: str
    cells: dict[str, UnitCell]
    recipes: RecipeTable
    base: BaseParticles
    attrs: dict[str, Any] = field(default_factory=dict)
    manifest: Manifest | None = None
    shard_paths: tuple[Path, ...] = ()
    _base_index: dict[tuple[int, int], int] = field(default_factory=dict, repr=False)
    _row_base: np.ndarray | None = field(default=None, repr=False)
    _matrices: np.ndarray | None = field(default=None, repr=False)
    _id_rows: dict[str, int] | None = field(default=None, repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> DatasetStore:
        """Load and validate a store: an HDF5 file, a sharded store's manifest (``*.json``) or
        the folder that holds one manifest. Corrupt, truncated or inconsistent stores (a
        missing, extra, renamed or altered shard) raise :class:`C2NPStoreError`."""
        from c2np.store.manifest import find_manifest, is_manifest_file

        p = Path(path)
        if p.is_dir():
            return cls._open_sharded(find_manifest(p))
        if not p.is_file():
            raise C2NPStoreError(f"{p}: no such dataset store")
        if is_manifest_file(p):
            return cls._open_sharded(p)
        return cls._open_file(p, shard_ok=False)

    @classmethod
    def _open_file(cls, p: Path, *, shard_ok: bool) -> DatasetStore:
        import h5py

        from c2np.hdf5_guard import check_hdf5_readable

        if not shard_ok:    # shards were read by a child process in _open_sharded
            # a child process reads it first: damage cannot crash this one
            check_hdf5_readable(p, error=C2NPStoreError, what="HDF5 store")
        try:
            f = h5py.File(p, "r")
        except OSError as exc:
            raise C2NPStoreError(f"{p}: not a readable HDF5 store (corrupt or truncated: {exc})") from exc
        try:
            with f:
                return cls._load(p, f, shard_ok=shard_ok)
        except C2NPInputError:
            raise
        except (KeyError, OSError, ValueError, TypeError, IndexError, AttributeError, RuntimeError,
                OverflowError) as exc:
            raise C2NPStoreError(f"{p}: corrupt store ({type(exc).__name__}: {exc})") from exc

    @classmethod
    def _open_sharded(cls, mp: Path) -> DatasetStore:
        """Read a manifest, check its shard files (present, none extra, sizes and SHA-256),
        bound the declared sizes of all shards together by ``store_bytes`` before reading any
        array, then load the shards and join them into one store."""
        import h5py

        from c2np.hdf5_guard import check_hdf5_files_readable
        from c2np.limits import check as check_limit
        from c2np.store.manifest import check_shard_files, read_manifest

        manifest = read_manifest(mp)
        paths = check_shard_files(mp, manifest)
        # a child process reads every shard first, whoever wrote the manifest: damage cannot
        # crash this one (the SHA-256 recorded in the manifest proves nothing about its author)
        check_hdf5_files_readable(paths, error=C2NPStoreError, what="HDF5 shard")
        names = [f"{g}/{n}" for g, ns in _REQUIRED.items() for n in ns]
        total = 0.0
        for sp in paths:
            try:
                with h5py.File(sp, "r") as f:
                    total += check_declared_sizes(f, [n for n in names if n in f], source=str(sp),
                                                  limit="store_bytes")
            except OSError as exc:
                raise C2NPStoreError(f"{sp}: not a readable HDF5 shard (corrupt or truncated: {exc})") from exc
        check_limit("store_bytes", total, what=f"{mp}: declared array sizes of its {len(paths)} shards")
        parts = [cls._open_file(sp, shard_ok=True) for sp in paths]
        return _join_shards(cls, mp, manifest, paths, parts)

    @classmethod
    def _load(cls, p: Path, f: Any, *, shard_ok: bool = False) -> DatasetStore:
        import h5py

        if f.attrs.get("format") != FORMAT:
            raise C2NPStoreError(f"{p}: not a c2np store (format attribute {f.attrs.get('format')!r})")
        version = f.attrs.get("format_version", -1)
        if not (isinstance(version, (int, np.integer)) and int(version) == FORMAT_VERSION):
            raise C2NPStoreError(f"{p}: store format version {f.attrs.get('format_version')} is not "
                                 f"supported (expected {FORMAT_VERSION})")
        if "fingerprint" not in f.attrs:
            raise C2NPStoreError(f"{p}: store is incomplete (its build was interrupted)")
        if "shard" in f.attrs and not shard_ok:
            try:
                where = json.loads(f.attrs["shard"])
                what = (f"shard {where['index']} of {where['count']} of the sharded store {where['name']!r}; "
                        f"open its manifest {where['manifest']} (or its folder)")
            except (ValueError, KeyError, TypeError):
                what = "a shard of a sharded store; open its manifest (or its folder)"
            raise C2NPStoreError(f"{p}: is {what}")
        for group, names in _REQUIRED.items():
            for name in names:
                if f"{group}/{name}" not in f or not isinstance(f[f"{group}/{name}"], h5py.Dataset):
                    raise C2NPStoreError(f"{p}: store lacks dataset /{group}/{name}")
        check_declared_sizes(f, [f"{g}/{n}" for g, names in _REQUIRED.items() for n in names],
                             source=str(p), limit="store_bytes")
        try:
            ids = [s.decode("ascii") for s in f["cells/material_ids"][()]]
        except (UnicodeDecodeError, AttributeError) as exc:
            raise C2NPStoreError(f"{p}: /cells/material_ids are not ASCII names ({exc})") from exc
        check_store_names(ids, source=str(p))
        lat = f["cells/lattice"][()]
        aoff = f["cells/atom_offsets"][()]
        cnum = f["cells/numbers"][()]
        cfrac = f["cells/frac"][()]
        if len(lat) != len(ids) or len(aoff) != len(ids) + 1 or aoff[-1] != len(cnum) or len(cfrac) != len(cnum) \
                or aoff[0] != 0 or np.any(np.diff(aoff) <= 0):
            raise C2NPStoreError(f"{p}: /cells datasets have inconsistent lengths")
        try:
            cells = {mid: UnitCell(mid, lat[i], cnum[aoff[i]:aoff[i + 1]], cfrac[aoff[i]:aoff[i + 1]])
                     for i, mid in enumerate(ids)}
        except C2NPInputError as exc:
            raise C2NPStoreError(f"{p}: {exc}") from exc
        r = f["recipes"]
        materials = tuple(json.loads(r.attrs["materials"]))
        if not all(isinstance(m, str) for m in materials) or len(set(materials)) != len(materials):
            raise C2NPStoreError(f"{p}: /recipes materials attribute is not a list of distinct names")
        if set(materials) - set(ids):
            raise C2NPStoreError(f"{p}: recipes name materials without cells: {sorted(set(materials) - set(ids))}")
        cols = {k: r[k][()] for k in _REQUIRED["recipes"]}
        n = len(cols["material_index"])
        if any(len(v) != n for v in cols.values()) or cols["quaternion"].shape != (n, 4):
            raise C2NPStoreError(f"{p}: /recipes columns have inconsistent lengths")
        if n and (cols["material_index"].min() < 0 or cols["material_index"].max() >= len(materials)):
            raise C2NPStoreError(f"{p}: /recipes/material_index out of range")
        if n and (cols["split"].min() < 0 or cols["split"].max() >= len(SPLITS)):
            raise C2NPStoreError(f"{p}: /recipes/split has unknown split codes")
        if not np.all(np.isfinite(cols["quaternion"])):
            bad = int(np.flatnonzero(~np.all(np.isfinite(cols["quaternion"]), axis=1))[0])
            raise C2NPStoreError(f"{p}: /recipes/quaternion row {bad} is not finite: "
                                 f"{cols['quaternion'][bad].tolist()}")
        try:  # rounding off unit length is normalised; more is a damaged store
            cols["quaternion"] = normalise_quaternions(cols["quaternion"], where="/recipes/quaternion")
        except C2NPInputError as exc:
            raise C2NPStoreError(f"{p}: {exc}") from exc
        centre = cast(tuple[float, float, float],
                      tuple(float(x) for x in f.attrs.get("centre_frac", (0.0, 0.0, 0.0))))
        table = RecipeTable(
            protocol=str(f.attrs["protocol"]), materials=materials,
            material_index=cols["material_index"].astype(np.int32),
            radius_angstrom=cols["radius"].astype(np.int32),
            rotation_index=cols["rotation_index"].astype(np.int32),
            quaternion=cols["quaternion"].astype(np.float64), split=cols["split"].astype(np.int8),
            heldout_materials=tuple(json.loads(r.attrs.get("heldout_materials", "[]"))),
            centre_frac=centre, summary=json.loads(f.attrs.get("summary", "{}")),
        )
        b = f["base"]
        bcols = {k: b[k][()] for k in _REQUIRED["base"]}
        k = len(bcols["material_index"])
        if len(bcols["offsets"]) != k + 1 or bcols["offsets"][0] != 0 or bcols["offsets"][-1] != len(bcols["numbers"]) \
                or bcols["positions"].shape != (len(bcols["numbers"]), 3) or np.any(np.diff(bcols["offsets"]) < 0) \
                or any(len(bcols[c]) != k for c in ("radius", "boundary_margin", "paper_supercell_clips")):
            raise C2NPStoreError(f"{p}: /base datasets have inconsistent lengths")
        if not np.all(np.isfinite(bcols["positions"])):
            raise C2NPStoreError(f"{p}: /base/positions has non-finite values")
        base = BaseParticles(
            material_index=bcols["material_index"].astype(np.int32),
            radius_angstrom=bcols["radius"].astype(np.int32),
            offsets=bcols["offsets"].astype(np.int64), numbers=bcols["numbers"].astype(np.int64),
            positions_angstrom=bcols["positions"].astype(np.float32, copy=False),
            boundary_margin_angstrom=bcols["boundary_margin"],
            paper_supercell_clips=bcols["paper_supercell_clips"].astype(bool),
        )
        store = cls(path=p, protocol=table.protocol, source=str(f.attrs.get("source", "carved")),
                    fingerprint=str(f.attrs["fingerprint"]), cells=cells, recipes=table, base=base,
                    attrs={k2: (v.tolist() if isinstance(v, np.ndarray) else v) for k2, v in f.attrs.items()})
        store._base_index = base.index()
        wanted = {(int(m), int(rr)) for m, rr in zip(table.material_index, table.radius_angstrom)}
        missing = wanted - set(store._base_index)
        if missing:
            m0, r0 = sorted(missing)[0]
            raise C2NPStoreError(f"{p}: no base particle for {materials[m0]} R={r0} "
                                 f"({len(missing)} (material, R) pairs missing)")
        return store

    # --- access ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.recipes)

    @property
    def materials(self) -> tuple[str, ...]:
        """Material ids in recipe order."""
        return self.recipes.materials

    def _rows_base(self) -> np.ndarray:
        if self._row_base is None:
            t = self.recipes
            self._row_base = np.array([self._base_index[(int(m), int(r))]
                                       for m, r in zip(t.material_index, t.radius_angstrom)], dtype=np.int64)
        return self._row_base

    def _rotations(self) -> np.ndarray:
        if self._matrices is None:
            self._matrices = quaternions_to_matrices(self.recipes.quaternion)
        return self._matrices

    def base_particle(self, material: str, radius_angstrom: int) -> Particle:
        """The unrotated (material, R) particle in canonical order (float32 precision)."""
        if material not in self.materials:
            raise C2NPInputError(f"{self.path}: unknown material {material!r}")
        key = (self.materials.index(material), int(radius_angstrom))
        if key not in self._base_index:
            raise C2NPInputError(f"{self.path}: no particle for {material} at R={radius_angstrom} Å")
        nums, pos = self.base.get(self._base_index[key])
        return Particle(nums, pos)

    def particle_arrays(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """(numbers (n,), positions (n, 3) float64) of sample ``row``: the base particle rotated."""
        if not 0 <= row < len(self):
            raise C2NPInputError(f"{self.path}: sample row {row} is out of range 0..{len(self) - 1}")
        j = int(self._rows_base()[row])
        a, b = int(self.base.offsets[j]), int(self.base.offsets[j + 1])
        pos = self.base.positions_angstrom[a:b].astype(np.float64) @ self._rotations()[row].T
        return self.base.numbers[a:b], pos

    def particle(self, row: int) -> Particle:
        """The rotated, centred particle of sample ``row``."""
        return Particle(*self.particle_arrays(row))

    def sample(self, row: int) -> Sample:
        """The full :class:`Sample` of ``row``."""
        t = self.recipes
        mat = t.materials[int(t.material_index[row])]
        return Sample(row=int(row), sample_id=t.sample_id(int(row)),
                      material=mat, radius_angstrom=int(t.radius_angstrom[row]),
                      rotation_index=int(t.rotation_index[row]), quaternion=t.quaternion[row].copy(),
                      split=SPLITS[int(t.split[row])], particle=self.particle(row))

    def rows(self, split: str | None = None, *, material: str | None = None,
             radius: int | None = None) -> np.ndarray:
        """Row indices for a split / material / radius (None = any)."""
        return np.flatnonzero(self.recipes.mask(split, material=material, radius=radius))

    def iter_samples(self, rows: Iterable[int] | None = None) -> Iterator[Sample]:
        """Iterate samples (all rows when None)."""
        for row in (range(len(self)) if rows is None else rows):
            yield self.sample(int(row))

    def rows_for_ids(self, ids: Iterable[str]) -> np.ndarray:
        """Rows of the given sample ids; unknown ids raise :class:`C2NPInputError`."""
        if self._id_rows is None:
            self._id_rows = {sid: i for i, sid in enumerate(self.recipes.sample_ids())}
        out = []
        for sid in ids:
            if sid not in self._id_rows:
                raise C2NPInputError(f"{self.path}: unknown sample id {sid!r}")
            out.append(self._id_rows[sid])
        return np.asarray(out, dtype=np.int64)

    def files(self) -> list[Path]:
        """The files this store reads: the HDF5 file, or the manifest and its shards."""
        return [self.path, *self.shard_paths]

    def cell_list(self) -> list[UnitCell]:
        """Unit cells in the store's order."""
        return list(self.cells.values())

    def info(self) -> dict[str, Any]:
        """Sizes per split, per radius and per material, and provenance, as a dict."""
        t = self.recipes
        per_radius: dict[str, dict[str, int]] = {}
        for r in sorted(set(t.radius_angstrom.tolist())):
            m = t.radius_angstrom == r
            per_radius[str(r)] = {s: int(np.sum(m & (t.split == i))) for i, s in enumerate(SPLITS)
                                  if np.any(m & (t.split == i))}
        n_atoms = np.diff(self.base.offsets)
        return {
            "path": str(self.path), "protocol": self.protocol, "source": self.source,
            "fingerprint": self.fingerprint, "c2np_version": self.attrs.get("c2np_version"),
            "n_samples": len(t), "n_materials": len(t.materials), "materials": list(t.materials),
            "per_split": t.counts(), "per_radius": per_radius,
            "heldout_materials": list(t.heldout_materials),
            "n_base_particles": int(len(n_atoms)), "n_base_atoms": int(n_atoms.sum()),
            "max_atoms_per_particle": int(n_atoms.max()) if len(n_atoms) else 0,
            "n_supercell_clipped": int(self.base.paper_supercell_clips.sum()),
            "min_boundary_margin_angstrom": float(self.base.boundary_margin_angstrom.min()) if len(n_atoms) else None,
            "file_bytes": sum(f.stat().st_size for f in self.files()),
            "summary": self.recipes.summary,
            **({} if self.manifest is None else {
                "n_shards": len(self.manifest.shards),
                "shards": [{"file": e.file, "n_samples": e.n_samples, "n_materials": len(e.materials),
                            "first_material": e.materials[0], "last_material": e.materials[-1],
                            "bytes": e.bytes, "fingerprint": e.fingerprint} for e in self.manifest.shards]}),
        }


def _join_shards(cls: type[DatasetStore], mp: Path, manifest: Manifest, paths: Sequence[Path],
                 parts: Sequence[DatasetStore]) -> DatasetStore:
    """One store from its shards (checked against their manifest entries): cells, recipe
    rows and base particles concatenated in shard order, material indices shifted."""
    k = len(parts)
    for entry, sp, part in zip(manifest.shards, paths, parts):
        try:
            where = json.loads(part.attrs.get("shard", "{}"))
        except (TypeError, ValueError):
            where = {}
        expect = {"name": manifest.name, "index": entry.index, "count": k,
                  "rows": [entry.row_start, entry.row_stop]}
        if {key: where.get(key) for key in expect} != expect:
            raise C2NPStoreError(f"{sp}: is not shard {entry.index} of {k} of store {manifest.name!r} "
                                 f"(its shard attribute says {where})")
        if part.fingerprint != entry.fingerprint or part.materials != entry.materials \
                or len(part) != entry.n_samples or len(part.base.material_index) != entry.n_base_particles \
                or int(part.base.offsets[-1]) != entry.n_base_atoms or part.recipes.counts() != entry.per_split:
            raise C2NPStoreError(f"{sp}: its fingerprint, materials or counts differ from its entry "
                                 f"in {mp} (tampered or replaced)")
        if part.recipes.summary != manifest.summary:
            raise C2NPStoreError(f"{sp}: its recipe summary differs from the one in {mp}")
        if (part.protocol, part.source, tuple(part.recipes.centre_frac)) != \
                (manifest.protocol, manifest.source, manifest.centre_frac):
            raise C2NPStoreError(f"{sp}: protocol, source or carving centre differ from {mp}")
    m_off = np.cumsum([0] + [len(q.materials) for q in parts])
    a_off = np.cumsum([0] + [int(q.base.offsets[-1]) for q in parts])
    materials = tuple(m for q in parts for m in q.materials)
    check_store_names(materials, source=str(mp))
    heldout = tuple(m for q in parts for m in q.recipes.heldout_materials)
    if sorted(heldout) != sorted(manifest.heldout_materials):
        raise C2NPStoreError(f"{mp}: the shards' held-out materials differ from the manifest's")

    def cat(get: Any, dtype: Any = None) -> np.ndarray:
        out = np.concatenate([get(i, q) for i, q in enumerate(parts)])
        return out if dtype is None else out.astype(dtype)

    t = RecipeTable(
        protocol=manifest.protocol, materials=materials,
        material_index=cat(lambda i, q: q.recipes.material_index + m_off[i], np.int32),
        radius_angstrom=cat(lambda i, q: q.recipes.radius_angstrom),
        rotation_index=cat(lambda i, q: q.recipes.rotation_index),
        quaternion=cat(lambda i, q: q.recipes.quaternion), split=cat(lambda i, q: q.recipes.split),
        heldout_materials=manifest.heldout_materials, centre_frac=manifest.centre_frac,
        summary=manifest.summary)
    b = BaseParticles(
        material_index=cat(lambda i, q: q.base.material_index + m_off[i], np.int32),
        radius_angstrom=cat(lambda i, q: q.base.radius_angstrom),
        offsets=np.concatenate([[0]] + [q.base.offsets[1:] + a_off[i] for i, q in enumerate(parts)]).astype(np.int64),
        numbers=cat(lambda i, q: q.base.numbers), positions_angstrom=cat(lambda i, q: q.base.positions_angstrom),
        boundary_margin_angstrom=cat(lambda i, q: q.base.boundary_margin_angstrom),
        paper_supercell_clips=cat(lambda i, q: q.base.paper_supercell_clips))
    attrs = {key: v for key, v in parts[0].attrs.items() if key != "shard"}
    attrs.update(fingerprint=manifest.fingerprint, n_shards=k)
    cells = {m: q.cells[m] for q in parts for m in q.materials}
    store = cls(path=mp, protocol=manifest.protocol, source=manifest.source, fingerprint=manifest.fingerprint,
                cells=cells, recipes=t, base=b, attrs=attrs, manifest=manifest, shard_paths=tuple(paths))
    store._base_index = b.index()
    return store
