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

Writes go to a temporary file in the target folder that is renamed at the end, so an
interrupted build never leaves a half-written store.

A *sharded* store (``build_store(..., shards=K)``) is a JSON manifest plus K such files, each
holding a contiguous run of whole materials and an extra ``shard`` attribute;
:meth:`DatasetStore.open` of the manifest (or its folder) checks and joins them into one
store, the same as the single file of the same build (:mod:`c2np.store_manifest`,
docs/explanation/dataset.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from c2np.carving import carve, normalise_quaternions
from c2np.cells import UnitCell
from c2np.errors import C2NPInputError, C2NPStoreError
from c2np.executor import Context, Executor, LocalExecutor, same
from c2np.fileio import atomic_path
from c2np.particle import Particle
from c2np.splits import SPLITS, Protocol, RecipeTable, build_recipes, get_protocol
from c2np.store_manifest import Manifest
from c2np.terminal import printable
from c2np.version import __version__

__all__ = ["FORMAT", "FORMAT_VERSION", "Sample", "BaseParticles", "DatasetStore", "build_store",
           "write_store", "fingerprint", "carve_base_particles", "verify_store", "VerifyReport",
           "quaternions_to_matrices", "check_store_names", "check_declared_sizes", "verify_opened",
           "require_intact"]

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


# --- building -----------------------------------------------------------------------------
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


def build_store(cells: Sequence[UnitCell], path: str | os.PathLike[str],
                protocol: Protocol | str = "paper", *,
                radii_angstrom: Sequence[int] | None = None,
                centre_frac: tuple[float, float, float] = (0.0, 0.0, 0.0),
                progress: bool = True, executor: Executor | None = None,
                shards: int | None = None) -> Path:
    """Build recipes and base particles for ``cells`` and write the store atomically;
    ``executor`` carves the base particles (:func:`carve_base_particles`).

    ``shards=K`` writes a sharded store instead (:func:`write_sharded_store`): K HDF5 shards
    and a manifest at :func:`c2np.store_manifest.manifest_path_for` of ``path``, which is
    returned; the K shards are carved and written by K tasks of ``executor``."""
    cells = sorted(cells, key=lambda c: c.material_id)
    table = build_recipes(cells, protocol, radii_angstrom=radii_angstrom, centre_frac=centre_frac)
    if shards is not None:
        return write_sharded_store(path, cells, table, shards, progress=progress, executor=executor)
    base = carve_base_particles(cells, table, progress=progress, executor=executor)
    return write_store(path, cells, table, base)


# --- sharded stores -----------------------------------------------------------------------
#: Uncompressed bytes of one recipe row (i4 x 3, f8 x 4, i1) and of one base atom (u1, f4 x 3).
RECIPE_ROW_BYTES = 45
BASE_ATOM_BYTES = 13


def estimated_bytes_per_material(cells: Sequence[UnitCell], table: RecipeTable) -> np.ndarray:
    """(m,) estimated uncompressed array bytes of each material of ``table`` (recipe rows plus
    its base particles at the cell's number density; :func:`c2np.carving.estimated_atoms`)."""
    from c2np.carving import estimated_atoms

    by_id = {c.material_id: c for c in cells}
    rows = np.bincount(table.material_index, minlength=len(table.materials)).astype(np.float64)
    out = rows * RECIPE_ROW_BYTES
    for mi, r in sorted({(int(m), int(r)) for m, r in zip(table.material_index, table.radius_angstrom)}):
        out[mi] += BASE_ATOM_BYTES * estimated_atoms(by_id[table.materials[mi]], r)
    return out


def _material_rows(table: RecipeTable, m0: int, m1: int) -> tuple[int, int]:
    """The contiguous rows ``[a, b)`` of materials ``m0..m1-1`` (the table is material-major)."""
    rows = np.flatnonzero((table.material_index >= m0) & (table.material_index < m1))
    if len(rows) == 0:
        raise C2NPStoreError(f"materials {table.materials[m0]}..{table.materials[m1 - 1]} have no recipe rows")
    a, b = int(rows[0]), int(rows[-1]) + 1
    if b - a != len(rows):
        raise C2NPStoreError("the recipe table is not ordered by material; it cannot be sharded")
    return a, b


def shard_table(table: RecipeTable, m0: int, m1: int) -> RecipeTable:
    """The recipe table of a shard holding materials ``m0..m1-1`` of ``table``: their rows,
    material indices counted from ``m0``, the held-out materials among them, the same
    protocol, centre and summary."""
    a, b = _material_rows(table, m0, m1)
    mats = table.materials[m0:m1]
    mine = set(mats)
    return RecipeTable(
        protocol=table.protocol, materials=mats,
        material_index=(table.material_index[a:b] - m0).astype(np.int32),
        radius_angstrom=table.radius_angstrom[a:b].copy(), rotation_index=table.rotation_index[a:b].copy(),
        quaternion=table.quaternion[a:b].copy(), split=table.split[a:b].copy(),
        heldout_materials=tuple(m for m in table.heldout_materials if m in mine),
        centre_frac=table.centre_frac, summary=table.summary)


def shard_base(base: BaseParticles, m0: int, m1: int) -> BaseParticles:
    """The base particles of materials ``m0..m1-1`` (indices counted from ``m0``)."""
    js = np.flatnonzero((base.material_index >= m0) & (base.material_index < m1))
    if len(js) and np.any(np.diff(js) != 1):
        raise C2NPStoreError("the base particles are not ordered by material; they cannot be sharded")
    j0, j1 = (int(js[0]), int(js[-1]) + 1) if len(js) else (0, 0)
    a, b = int(base.offsets[j0]), int(base.offsets[j1])
    return BaseParticles(
        material_index=(base.material_index[j0:j1] - m0).astype(np.int32),
        radius_angstrom=base.radius_angstrom[j0:j1].copy(), offsets=base.offsets[j0:j1 + 1] - a,
        numbers=base.numbers[a:b], positions_angstrom=base.positions_angstrom[a:b],
        boundary_margin_angstrom=base.boundary_margin_angstrom[j0:j1],
        paper_supercell_clips=base.paper_supercell_clips[j0:j1])


@dataclass(frozen=True)
class _ShardJob:
    """What one task needs to carve and write one shard (picklable)."""

    path: str
    index: int
    count: int
    row_start: int
    cells: tuple[UnitCell, ...]
    table: RecipeTable
    attr: str


def _write_shard(_state: Any, job: _ShardJob) -> Any:
    """Carve a shard's base particles, write it atomically, hash it: its manifest entry."""
    from c2np.fileio import file_sha256
    from c2np.store_manifest import ShardEntry

    base = carve_base_particles(job.cells, job.table)
    fp = fingerprint(job.cells, job.table, base)
    p = _write_h5(job.path, job.cells, job.table, base, fp, extra_attrs={"shard": job.attr})
    return ShardEntry(index=job.index, file=p.name, bytes=p.stat().st_size, sha256=file_sha256(p),
                      fingerprint=fp, row_start=job.row_start, row_stop=job.row_start + len(job.table),
                      materials=job.table.materials, n_base_particles=len(base.material_index),
                      n_base_atoms=int(base.offsets[-1]), per_split=job.table.counts())


def _swap_in(manifest_path: Path, name: str, staging: Path, entries: Sequence[Any], manifest_text: str) -> None:
    """Put a finished build in place of the old store: the old manifest is removed first
    (durably, so no manifest ever points at shards being replaced), then the old shard files
    of this store name, then the new shards are renamed in from ``staging`` and the new
    manifest is written last."""
    from c2np.fileio import remove_durably, write_text
    from c2np.store_manifest import shard_glob

    remove_durably(manifest_path)
    new = {e.file for e in entries}
    for old in sorted(manifest_path.parent.glob(shard_glob(name))):
        if old.name not in new and old.is_file() and not old.is_symlink():
            remove_durably(old)
    for e in entries:
        os.replace(staging / e.file, manifest_path.parent / e.file)
    write_text(manifest_path, manifest_text)


@contextlib.contextmanager
def _build_lock(manifest_path: Path) -> Iterator[None]:
    """Hold the lock file ``.{manifest}.lock`` beside a sharded store while it is built; a
    second build of the same store is refused at once (one line), never interleaved."""
    try:
        import fcntl
    except ImportError:  # no advisory locks on this platform
        yield
        return
    lock = manifest_path.parent / f".{manifest_path.name}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise C2NPInputError(f"{printable(manifest_path)}: another build is writing this store now "
                                 f"(it holds {printable(lock.name)}); wait for it or choose another -o") from None
        yield
    finally:
        os.close(fd)


def write_sharded_store(path: str | os.PathLike[str], cells: Sequence[UnitCell], table: RecipeTable,
                        count: int, *, progress: bool = False,
                        executor: Executor | None = None) -> Path:
    """Write ``table`` as a store of ``count`` shards (contiguous runs of materials of about
    equal estimated size) and its manifest; returns the manifest path.

    Each shard is carved and written by one task of ``executor`` into a staging folder beside
    the manifest; only when every shard is written is the old store (manifest, then shards)
    replaced by the new one, manifest last (:func:`_swap_in`). So a build that fails (a limit,
    a damaged cell, a full disk) leaves the old store as it was, and a killed one leaves either
    store readable or, during the swap's few renames, no manifest; never one that points at
    missing or partial shards. A second build of the same store while one runs is refused
    (:func:`_build_lock`).
    Sizes are estimated first: ``count`` within the limit ``store_shards``, the whole store
    within ``store_bytes`` (a reader holds it in memory)."""
    from c2np.fileio import TEMP_SUFFIX, check_output_path, remove_stale_temps
    from c2np.limits import check as check_limit
    from c2np.names import check_safe_name
    from c2np.store_manifest import (
        manifest_json,
        manifest_path_for,
        partition_materials,
        shard_file_name,
        sharded_fingerprint,
    )

    mp = manifest_path_for(path)
    check_output_path(mp)
    name = check_safe_name(mp.stem, what="store name (the manifest's file name without .json)")
    check_safe_name(shard_file_name(name, count - 1, count), what="shard file name")
    check_store_names(list(table.materials), source=str(mp))
    check_limit("store_shards", count, what=f"{mp}: --shards")
    weights = estimated_bytes_per_material(cells, table)
    check_limit("store_bytes", float(weights.sum()),
                what=f"{mp}: estimated size of the store's arrays (a reader holds the whole store)")
    cuts = partition_materials(weights.tolist(), count)
    by_id = {c.material_id: c for c in cells}
    jobs = []
    for i, (m0, m1) in enumerate(cuts):
        sub = shard_table(table, m0, m1)
        row0 = _material_rows(table, m0, m1)[0]
        attr = json.dumps({"name": name, "manifest": mp.name, "index": i, "count": count,
                           "rows": [row0, row0 + len(sub)]})
        jobs.append(_ShardJob(path=str(mp.parent / shard_file_name(name, i, count)), index=i, count=count,
                              row_start=row0, cells=tuple(by_id[m] for m in sub.materials), table=sub,
                              attr=attr))
    mp.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(mp):
        remove_stale_temps(mp)  # the staging folders of killed builds
        staging = Path(tempfile.mkdtemp(prefix=f".{mp.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=mp.parent))
        try:
            jobs = [replace(j, path=str(staging / Path(j.path).name)) for j in jobs]
            bar = None
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(total=count, desc="writing shards", unit="shard")
            ex = executor if executor is not None else LocalExecutor(1)
            entries = []
            for part in ex.map(_write_shard, jobs, chunk=1):
                entries.extend(part)
                if bar is not None:
                    bar.update(len(part))
            if bar is not None:
                bar.close()
            fp = sharded_fingerprint([(e.row_start, e.row_stop, e.fingerprint) for e in entries])
            manifest = Manifest(name=name, fingerprint=fp, protocol=table.protocol, source="carved",
                                c2np_version=__version__, centre_frac=table.centre_frac, n_samples=len(table),
                                heldout_materials=table.heldout_materials, summary=table.summary,
                                shards=tuple(entries))
            _swap_in(mp, name, staging, entries, manifest_json(manifest))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return mp


# --- reading ------------------------------------------------------------------------------
_REQUIRED = {
    "cells": ("material_ids", "lattice", "atom_offsets", "numbers", "frac"),
    "recipes": ("material_index", "radius", "rotation_index", "quaternion", "split"),
    "base": ("material_index", "radius", "offsets", "numbers", "positions", "boundary_margin",
             "paper_supercell_clips"),
}


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
        manifest: the :class:`~c2np.store_manifest.Manifest` of a sharded store (``path`` is
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
        from c2np.store_manifest import find_manifest, is_manifest_file

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
        from c2np.store_manifest import check_shard_files, read_manifest

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


# --- verification -------------------------------------------------------------------------
@dataclass(frozen=True)
class VerifyReport:
    """Outcome of :func:`verify_store`.

    Attributes:
        ok: everything matched.
        fingerprint_stored, fingerprint_recomputed: hex digests.
        n_base_checked: base particles re-carved and compared.
        max_position_error_angstrom: largest |stored - re-carved| over all atoms.
        recipes_match_protocol: the recipe table equals a fresh build of its protocol
            (None when it could not be rebuilt, e.g. an imported store).
        problems: one line per mismatch.
    """

    ok: bool
    fingerprint_stored: str
    fingerprint_recomputed: str
    n_base_checked: int
    max_position_error_angstrom: float
    recipes_match_protocol: bool | None
    problems: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        from dataclasses import asdict

        return asdict(self)


def verify_store(path: str | os.PathLike[str], *, position_tol_angstrom: float | None = None,
                 progress: bool = False, executor: Executor | None = None) -> VerifyReport:
    """Re-carve every base particle from its cell, compare with the store (species, positions,
    boundary margins, clip flags), rebuild the recipe table from its protocol, and recompute
    the fingerprint.

    Positions must equal the re-carved ones rounded to float32 (within 2 float32 ulps, so a
    shift of 1e-5 Å is caught), or agree within ``position_tol_angstrom`` when it is given.
    ``executor`` re-carves the base particles (:mod:`c2np.executor`; default: this process).
    """
    return verify_opened(DatasetStore.open(path), position_tol_angstrom=position_tol_angstrom,
                         progress=progress, executor=executor)


def verify_opened(store: DatasetStore, *, position_tol_angstrom: float | None = None,
                  progress: bool = False, check_recipes: bool = True,
                  executor: Executor | None = None) -> VerifyReport:
    """:func:`verify_store` of a store already opened; ``check_recipes=False`` skips the
    rebuild of the recipe table from its protocol (the fingerprint still covers the table)."""
    cells = [store.cells[m] for m in store.materials]
    table = store.recipes
    problems: list[str] = []
    recipes_match: bool | None = None
    if store.source == "carved" and check_recipes:
        try:
            fresh = build_recipes(cells, get_protocol(store.protocol),
                                  radii_angstrom=sorted(set(table.radius_angstrom.tolist())),
                                  centre_frac=table.centre_frac)
            recipes_match = fresh.canonical_bytes() == table.canonical_bytes()
            if not recipes_match:
                problems.append("recipe table differs from a fresh build of protocol "
                                f"{store.protocol!r}")
        except C2NPInputError as exc:
            problems.append(f"cannot rebuild recipes: {exc}")
            recipes_match = False
    if store.source == "carved":
        recarved = carve_base_particles(cells, table, progress=progress, executor=executor)
        max_err = 0.0
        rec_index = recarved.index()
        in_file = ([f"{e.file}: " for e in store.manifest.shards for _ in e.materials]
                   if store.manifest is not None else [""] * len(table.materials))
        for key, j in store._base_index.items():
            nums_s, pos_s = store.base.get(j)
            jj = rec_index.get(key)
            label = f"{in_file[key[0]]}{table.materials[key[0]]} R={key[1]}"
            if jj is None:
                problems.append(f"{label}: stored but not in the recipes")
                continue
            nums_c, pos_c = recarved.get(jj)
            if len(nums_c) != len(nums_s) or not np.array_equal(nums_c, nums_s):
                problems.append(f"{label}: {len(nums_s)} stored atoms vs {len(nums_c)} re-carved "
                                "(or species differ)")
                continue
            if len(pos_c):
                diff = np.abs(pos_s.astype(np.float64) - pos_c)
                err = float(diff.max())
                if position_tol_angstrom is None:
                    allowed = 2.0 * np.spacing(np.abs(pos_c).astype(np.float32)).astype(np.float64) + 1e-12
                    bad = bool(np.any(diff > allowed))
                else:
                    bad = err > position_tol_angstrom
            else:
                err, bad = 0.0, False
            max_err = max(max_err, err)
            if bad:
                problems.append(f"{label}: positions differ by up to {err:.3g} Å")
            m_s, m_c = float(store.base.boundary_margin_angstrom[j]), float(recarved.boundary_margin_angstrom[jj])
            if not abs(m_s - m_c) <= 1e-9:
                problems.append(f"{label}: boundary margin {m_s!r} Å stored, {m_c!r} Å re-carved")
            if bool(store.base.paper_supercell_clips[j]) != bool(recarved.paper_supercell_clips[jj]):
                problems.append(f"{label}: supercell clip flag {bool(store.base.paper_supercell_clips[j])} "
                                f"stored, {bool(recarved.paper_supercell_clips[jj])} re-carved")
        fp = _recomputed_fingerprint(store, recarved, problems)
        n_checked = len(store._base_index)
    else:
        max_err = float("nan")
        fp = _recomputed_fingerprint(store, store.base, problems)
        n_checked = 0
    if fp != store.fingerprint:
        problems.append(f"fingerprint mismatch: stored {store.fingerprint[:16]}…, recomputed {fp[:16]}…")
    return VerifyReport(ok=not problems, fingerprint_stored=store.fingerprint, fingerprint_recomputed=fp,
                        n_base_checked=n_checked, max_position_error_angstrom=max_err,
                        recipes_match_protocol=recipes_match, problems=tuple(problems))


def _recomputed_fingerprint(store: DatasetStore, base: BaseParticles, problems: list[str]) -> str:
    """The fingerprint of ``store`` with ``base`` for its base particles: the single-file one,
    or, for a sharded store, each shard's (a mismatch is a problem naming the shard file)
    joined by :func:`c2np.store_manifest.sharded_fingerprint`."""
    from c2np.store_manifest import sharded_fingerprint

    cells = [store.cells[m] for m in store.materials]
    if store.manifest is None:
        return fingerprint(cells, store.recipes, base)
    rows_fps = []
    m0 = 0
    for entry in store.manifest.shards:
        m1 = m0 + len(entry.materials)
        fp = fingerprint(cells[m0:m1], shard_table(store.recipes, m0, m1), shard_base(base, m0, m1))
        if fp != entry.fingerprint:
            problems.append(f"{entry.file}: shard fingerprint mismatch: recorded {entry.fingerprint[:16]}…, "
                            f"recomputed {fp[:16]}…")
        rows_fps.append((entry.row_start, entry.row_stop, fp))
        m0 = m1
    return sharded_fingerprint(rows_fps)


_INTACT: set[tuple[Any, ...]] = set()


def require_intact(store: DatasetStore, *, executor: Executor | None = None) -> None:
    """Refuse (:class:`C2NPStoreError`) a store that does not match its fingerprint, before it
    is used for scoring: the checks of :func:`verify_store` but the protocol rebuild (base
    particles re-carved, by ``executor`` when given, and compared; fingerprint recomputed). A
    store once found intact is not re-checked in this process while its files (inode, size,
    modification time) are unchanged, nor in a later process when a stamp of this machine's
    cache records the same file bytes (SHA-256), fingerprint and c2np code
    (:mod:`c2np.store_stamps`; ``C2NP_NO_STORE_STAMPS=1`` turns that off)."""
    files = store.files()
    key = (store.fingerprint, *((str(f.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
                                for f in files for st in (f.stat(),)))
    if key in _INTACT:
        return
    from c2np import store_stamps
    from c2np.fileio import file_sha256

    stamp = None
    if store_stamps.stamps_enabled():
        digests = [file_sha256(f) for f in files]
        stamp = store_stamps.store_key(store.fingerprint, digests)
        if store_stamps.has_stamp(stamp, store.fingerprint):
            _INTACT.add(key)
            return
    report = verify_opened(store, check_recipes=False, executor=executor)
    if not report.ok:
        shown = "; ".join(report.problems[:3]) + (f"; and {len(report.problems) - 3} more"
                                                  if len(report.problems) > 3 else "")
        raise C2NPStoreError(f"{store.path}: the store does not match its fingerprint (tampered or "
                             f"damaged; `c2np verify` lists every problem): {shown}")
    _INTACT.add(key)
    if stamp is not None:
        store_stamps.write_stamp(stamp, store.fingerprint, [str(f.resolve()) for f in files])
