"""Sharded stores: a JSON manifest (:mod:`c2np.store.manifest`) plus K HDF5 files, each
holding a contiguous run of whole materials, written by K tasks of an executor and swapped
in under a build lock; and the cuts of a recipe table and its base particles into shards."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from c2np.cells import UnitCell
from c2np.errors import C2NPInputError, C2NPStoreError
from c2np.executor import Executor, LocalExecutor
from c2np.splits import RecipeTable
from c2np.store.layout import BaseParticles, check_store_names, fingerprint
from c2np.store.manifest import Manifest
from c2np.store.write import _write_h5, carve_base_particles
from c2np.terminal import printable
from c2np.version import __version__

__all__ = ["RECIPE_ROW_BYTES", "BASE_ATOM_BYTES", "estimated_bytes_per_material", "shard_table",
           "shard_base", "write_sharded_store"]


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
    from c2np.store.manifest import ShardEntry

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
    from c2np.store.manifest import shard_glob

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
    from c2np.store.manifest import (
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
