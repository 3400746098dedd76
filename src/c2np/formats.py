"""Exchange with other layouts: export a store to extxyz, to ASE's database or to the
original generator's folder layout, and import the original raw archive into a store (contract
§5). The Parquet export is :mod:`c2np.parquet_export`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from c2np.carving import canonical_order, carve
from c2np.cells import UnitCell, read_cells, write_cif
from c2np.errors import C2NPInputError
from c2np.executor import Context, Executor, LocalExecutor
from c2np.fileio import atomic_directory, atomic_write
from c2np.particle import Particle
from c2np.particle_io import format_extxyz_frame, read_particle
from c2np.splits import SPLITS, build_recipes
from c2np.store import BaseParticles, DatasetStore, check_store_names, write_store

__all__ = ["EXPORT_SPLITS", "export_extxyz", "export_original", "export_asedb", "import_original"]


def _progress(iterable: Any, desc: str, total: int | None, enabled: bool) -> Any:
    """``iterable`` with a progress bar (a bar to update when ``iterable`` is None; None when
    not ``enabled`` and ``iterable`` is None)."""
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, unit="sample")


#: Samples formatted per executor task by the exports.
EXPORT_CHUNK = 64
#: the split files of :func:`export_extxyz`
EXPORT_SPLITS: tuple[str, ...] = (*SPLITS, "heldout")


def _open_store(path: str) -> DatasetStore:
    """Worker side: the store of an export, opened by its path (spawned and Dask workers)."""
    return DatasetStore.open(path)


def _store_context(store: DatasetStore) -> Context:
    return Context(_open_store, (str(store.path),), value=store)


def _extxyz_text(store: DatasetStore, item: tuple[int, str]) -> str:
    """Worker side: one sample ``(row, export split)`` as an extxyz frame (info: sample_id,
    material, radius_angstrom, rotation_index, quaternion_xyzw, split)."""
    row, split = item
    s = store.sample(int(row))
    return format_extxyz_frame(s.particle, {"sample_id": s.sample_id, "material": s.material,
                                            "radius_angstrom": s.radius_angstrom,
                                            "rotation_index": s.rotation_index,
                                            "quaternion_xyzw": s.quaternion, "split": split})


def _original_text(store: DatasetStore, row: int) -> tuple[str, str, int, str]:
    """Worker side: (material, R folder, rotation index, plain-XYZ text) of one sample."""
    s = store.sample(int(row))
    q = " ".join(f"{x:.12f}" for x in s.quaternion)
    comment = (f"sample_id={s.sample_id} split={s.split} quaternion_xyzw=\"{q}\" "
               f"radius_angstrom={s.radius_angstrom}")
    return s.material, f"R{s.radius_angstrom}", int(s.rotation_index), _plain_xyz(s.particle, comment)


def export_extxyz(store: DatasetStore, out_dir: str | os.PathLike[str], *,
                  splits: Sequence[str] | None = None, progress: bool = True,
                  executor: Executor | None = None) -> list[Path]:
    """Write one ``{split}.extxyz`` per split (:data:`EXPORT_SPLITS`; the ``split`` column of
    :func:`c2np.parquet_export.row_splits`: ``train`` / ``val`` hold only the rows a model may
    learn from, ``heldout`` the training and validation radii of held-out materials); frames
    carry sample_id, material, radius_angstrom, rotation_index, quaternion_xyzw and split in
    ``info``. ``executor``
    (:mod:`c2np.executor`; default: this process) formats the frames, in chunks of
    :data:`EXPORT_CHUNK`; this process writes them, in row order (the files do not depend on
    the executor)."""
    out = Path(out_dir)
    ex = executor if executor is not None else LocalExecutor(1)
    ctx = _store_context(store)
    written = []
    from c2np.parquet_export import row_splits

    names = row_splits(store.recipes)
    unknown = [s for s in (splits or ()) if s not in EXPORT_SPLITS]
    if unknown:
        raise C2NPInputError(f"--split: unknown split {unknown[0]!r}; choose one of {list(EXPORT_SPLITS)}")
    for split in (splits or EXPORT_SPLITS):
        rows = [(int(r), split) for r in np.flatnonzero(names == split)]
        if len(rows) == 0:
            continue
        bar = _progress(None, f"export {split}", len(rows), progress)
        with atomic_write(out / f"{split}.extxyz") as fh:
            for part in ex.map(_extxyz_text, rows, context=ctx, chunk=EXPORT_CHUNK):
                fh.write("".join(part))
                if bar is not None:
                    bar.update(len(part))
        if bar is not None:
            bar.close()
        written.append(out / f"{split}.extxyz")
    return written


def _plain_xyz(particle: Particle, comment: str) -> str:
    from ase.data import chemical_symbols

    lines = [str(particle.n_atoms), comment]
    lines.extend(f"{chemical_symbols[int(z)]} {x:.8f} {y:.8f} {zz:.8f}"
                 for z, (x, y, zz) in zip(particle.numbers, particle.positions_angstrom))
    return "\n".join(lines) + "\n"


def export_original(store: DatasetStore, out_dir: str | os.PathLike[str], *,
                    progress: bool = True, executor: Executor | None = None) -> Path:
    """Write the original layout ``quaternions/{Material}/R{r}/xyz/rot_{k}.xyz`` plus
    ``cifs/{Material}.cif``. Everything is written into a temporary folder beside
    ``out_dir`` and renamed at the end; an existing non-empty ``out_dir`` is refused.
    ``executor`` (default: this process) formats the files; this process writes them."""
    out = Path(out_dir)
    check_store_names(list(store.materials), source=str(store.path))  # they become folder names
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise C2NPInputError(f"{out}: already exists and is not an empty folder; choose another --out")
    ex = executor if executor is not None else LocalExecutor(1)
    with atomic_directory(out) as tmp:
        for mid in store.materials:
            write_cif(store.cells[mid], tmp / "cifs" / f"{mid}.cif")
        made: set[Path] = set()
        bar = _progress(None, "export original", len(store), progress)
        for part in ex.map(_original_text, list(range(len(store))), context=_store_context(store),
                           chunk=EXPORT_CHUNK):
            for material, r_folder, rot, text in part:
                folder = tmp / "quaternions" / material / r_folder / "xyz"
                if folder not in made:
                    folder.mkdir(parents=True, exist_ok=True)
                    made.add(folder)
                (folder / f"rot_{rot}.xyz").write_text(text)
            if bar is not None:
                bar.update(len(part))
        if bar is not None:
            bar.close()
    return out


def export_asedb(store: DatasetStore, path: str | os.PathLike[str], *, splits: Sequence[str] = (),
                 progress: bool = True) -> Path:
    """Write an ASE database (SQLite, ``ase.db.connect``) atomically: every unit cell
    (periodic, ``kind="cell"``, ``material``), every base particle (``kind="base"``,
    ``material``, ``radius_angstrom``; unrotated, centred) and, for each of ``splits``
    (:data:`c2np.loaders.LOADER_SPLITS`), its particles (``kind="sample"``, ``sample_id``,
    ``split``, ``radius_angstrom``, ``rotation_index``; quaternion in ``data``; on ``train`` /
    ``val`` also ``material``, ``spacegroup`` and ``a``, ``b``, ``c`` (Å), ``alpha``,
    ``beta``, ``gamma`` (°) of the standardized conventional cell). The database's
    ``metadata`` holds the fingerprint and the protocol."""
    from ase import Atoms
    from ase.db import connect

    from c2np.fileio import atomic_path, check_output_path
    from c2np.lattice import LATTICE_PARAMETER_NAMES
    from c2np.loaders import LOADER_SPLITS, iter_items

    p = check_output_path(path)
    bad = [s for s in splits if s not in LOADER_SPLITS]
    if bad:
        raise C2NPInputError(f"--split: unknown split {bad[0]!r}; choose from {list(LOADER_SPLITS)}")
    t = store.recipes
    with atomic_path(p) as tmp:
        db = connect(tmp, type="db", append=False)
        with db:
            for cell in store.cell_list():
                db.write(cell.to_ase(), kind="cell", material=cell.material_id)
            for j in range(len(store.base.material_index)):
                nums, pos = store.base.get(j)
                db.write(Atoms(numbers=nums, positions=np.asarray(pos, dtype=np.float64), pbc=False), kind="base",
                         material=t.materials[int(store.base.material_index[j])],
                         radius_angstrom=int(store.base.radius_angstrom[j]))
            for split in splits:
                for it in _progress(iter_items(store, split), f"asedb {split}", None, progress):
                    keys: dict[str, Any] = {"kind": "sample", "sample_id": it["sample_id"], "split": split,
                                            "radius_angstrom": int(it["radius_angstrom"]),
                                            "rotation_index": int(it["rotation_index"])}
                    if "material" in it:
                        keys.update({"material": it["material"], "spacegroup": int(it["spacegroup"]),
                                     **{k: float(v) for k, v in zip(LATTICE_PARAMETER_NAMES,
                                                                     it["lattice_parameters"])}})
                    db.write(Atoms(numbers=it["numbers"], positions=it["positions_angstrom"], pbc=False),
                             key_value_pairs=keys, data={"quaternion_xyzw": it["quaternion_xyzw"]})
        db.metadata = {"format": "c2np-asedb", "fingerprint": store.fingerprint, "protocol": t.protocol,
                       "heldout_materials": list(t.heldout_materials)}
    return p


_XYZ_NAME = re.compile(r"^(?P<mat>.+)_R(?P<r>[0-9]+)\.xyz$", re.IGNORECASE)


def _recentre(cell: UnitCell, pos: np.ndarray) -> tuple[np.ndarray, float]:
    """Shift a pre-carved particle so that its sphere centre is the origin. The original
    centre is a lattice point (contract §3), so the centroid is snapped to the nearest lattice
    translation. Returns (positions, distance between centroid and snapped centre)."""
    with np.errstate(over="ignore", invalid="ignore"):  # absurd coordinates are refused later
        centroid = pos.mean(axis=0)
        frac = centroid @ np.linalg.inv(cell.lattice_angstrom)
        snapped = np.round(frac) @ cell.lattice_angstrom
        return pos - snapped, float(np.linalg.norm(centroid - snapped))


def import_original(root: str | os.PathLike[str], out_path: str | os.PathLike[str], *,
                    progress: bool = True) -> Path:
    """Build a store from the original raw archive: ``cifs/*.cif`` and pre-carved
    ``materials/{Material}_R{r}.xyz``. The recipes are protocol ``paper`` over the radii
    present; each pre-carved particle becomes that (material, R)'s base particle (recentred,
    canonical order) and is compared with c2np's own carve (recorded in the store)."""
    root = Path(root)
    cells = read_cells(root / "cifs") if (root / "cifs").is_dir() else None
    if cells is None:
        raise C2NPInputError(f"{root}: expected a folder 'cifs/' with the unit cells")
    by_id = {c.material_id: c for c in cells}
    mat_dir = root / "materials"
    if not mat_dir.is_dir():
        raise C2NPInputError(f"{root}: expected a folder 'materials/' with {{Material}}_R{{r}}.xyz files")
    files: dict[tuple[str, int], Path] = {}
    for f in sorted(x for x in mat_dir.iterdir() if x.suffix.lower() == ".xyz" and x.is_file()):
        m = _XYZ_NAME.match(f.name)
        if not m:
            raise C2NPInputError(f"{f}: name does not match {{Material}}_R{{r}}.xyz")
        if m["mat"] not in by_id:
            raise C2NPInputError(f"{f}: material {m['mat']!r} has no CIF in {root / 'cifs'}")
        files[(m["mat"], int(m["r"]))] = f
    if not files:
        raise C2NPInputError(f"{mat_dir}: no {{Material}}_R{{r}}.xyz files")
    radii = sorted({r for _, r in files})
    materials = sorted({m for m, _ in files})
    missing = [f"{m}_R{r}.xyz" for m in materials for r in radii if (m, r) not in files]
    if missing:
        raise C2NPInputError(f"{mat_dir}: every material needs every radius; missing {missing[:5]}"
                             + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    used_cells = [by_id[m] for m in materials]
    table = build_recipes(used_cells, "paper", radii_angstrom=radii)
    pairs = sorted({(int(mi), int(r)) for mi, r in zip(table.material_index, table.radius_angstrom)})
    nums_l, pos_l, margins, clips, report = [], [], [], [], []
    iterator: Any = pairs
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(pairs, desc="importing particles", unit="particle")
    for mi, r in iterator:
        mat = table.materials[mi]
        part = read_particle(files[(mat, r)])
        pos, shift_residual = _recentre(by_id[mat], part.positions_angstrom)
        _check_imported(files[(mat, r)], part.numbers, pos, r)
        order = canonical_order(part.numbers, pos)
        nums, pos = part.numbers[order], pos[order].astype(np.float32).astype(np.float64)
        ref = carve(by_id[mat], r)
        agree = _agreement(nums, pos, ref.particle)
        report.append({"material": mat, "radius_angstrom": r, "n_atoms_original": int(len(nums)),
                       "n_atoms_carved": ref.particle.n_atoms, "centre_residual_angstrom": shift_residual,
                       "matched_within_0.01A": agree})
        nums_l.append(nums)
        pos_l.append(pos)
        margins.append(ref.boundary_margin_angstrom)
        clips.append(ref.paper_supercell_clips)
    offsets = np.zeros(len(pairs) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(n) for n in nums_l])
    base = BaseParticles(np.array([p[0] for p in pairs], np.int32), np.array([p[1] for p in pairs], np.int32),
                         offsets, np.concatenate(nums_l), np.concatenate(pos_l),
                         np.array(margins), np.array(clips, dtype=bool))
    return write_store(out_path, used_cells, table, base, source="imported-original",
                       extra_attrs={"import_report": json.dumps(report)})


#: Slack (Å) beyond R allowed for a pre-carved atom (the original generator's own tolerance).
IMPORT_RADIUS_SLACK_ANGSTROM = 0.5


def _check_imported(path: Path, numbers: np.ndarray, pos: np.ndarray, radius: int) -> None:
    """A pre-carved particle must lie in its sphere and have no overlapping atoms."""
    from scipy.spatial import cKDTree

    from c2np.cells import MIN_ATOM_DISTANCE_ANGSTROM

    with np.errstate(over="ignore", invalid="ignore"):
        dist = np.linalg.norm(pos, axis=1)
    outside = np.flatnonzero(~(dist <= radius + IMPORT_RADIUS_SLACK_ANGSTROM))  # NaN/inf count as outside
    if len(outside):
        far = int(outside[0])
        raise C2NPInputError(f"{path}: line {far + 3}: atom {dist[far]:.6g} Å from the particle centre, "
                             f"outside the R = {radius} Å sphere")
    pairs = cKDTree(pos).query_pairs(MIN_ATOM_DISTANCE_ANGSTROM, output_type="ndarray")
    if len(pairs):
        i, j = sorted(int(x) for x in pairs[0])
        raise C2NPInputError(f"{path}: lines {i + 3} and {j + 3}: atoms closer than "
                             f"{MIN_ATOM_DISTANCE_ANGSTROM} Å (overlapping)")


def _agreement(nums: np.ndarray, pos: np.ndarray, ref: Particle, tol_angstrom: float = 0.01) -> float:
    """Fraction of reference atoms with a same-element imported atom within ``tol``."""
    from scipy.spatial import cKDTree

    if ref.n_atoms == 0:
        return 1.0 if len(nums) == 0 else 0.0
    hit = 0
    for z in np.unique(ref.numbers):
        a = pos[nums == z]
        b = ref.positions_angstrom[ref.numbers == z]
        if len(a) == 0:
            continue
        d, _ = cKDTree(a).query(b, k=1)
        hit += int(np.sum(d <= tol_angstrom))
    return hit / ref.n_atoms
