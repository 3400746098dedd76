"""A dataset store as Parquet tables with a dataset card (``c2np export --format parquet``),
loadable offline with ``datasets.load_dataset("parquet", data_files=...)`` or pandas, and
read back here with its fingerprint recomputed.

Files of an export folder:

* ``recipes.parquet``: one row per sample (the recipe table);
* ``base.parquet``: one row per (material, R), the unrotated base particle (the compact
  form: a sample is its base particle rotated by its quaternion);
* ``cells.parquet``: one row per material, its unit cell;
* ``samples.parquet`` (optional): materialised particles of chosen splits, rows as
  :func:`c2np.loaders.loader_rows` gives them, with the task-2 targets on ``train`` / ``val``;
* ``README.md``: the dataset card (fields, units, licence, fingerprint).

Every Parquet file carries the export's metadata (format, version, fingerprint, protocol)
under the schema metadata key ``c2np``. pyarrow is optional (``pip install 'c2np[export]'``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from c2np.cells import UnitCell
from c2np.errors import C2NPEnvironmentError, C2NPInputError
from c2np.fileio import atomic_directory
from c2np.splits import SPLITS, RecipeTable
from c2np.store import BaseParticles, DatasetStore

__all__ = ["PARQUET_FORMAT", "PARQUET_FORMAT_VERSION", "TABLES", "ParquetExport", "ExportCheck", "export_parquet",
           "read_parquet_export", "row_splits"]

PARQUET_FORMAT = "c2np-parquet"
PARQUET_FORMAT_VERSION = 1
META_KEY = b"c2np"
#: the tables every export holds, and their required columns
TABLES: dict[str, tuple[str, ...]] = {
    "recipes": ("sample_id", "material", "material_index", "radius_angstrom", "rotation_index",
                "quaternion_xyzw", "split", "radius_split", "heldout_material", "base_index"),
    "base": ("material", "material_index", "radius_angstrom", "n_atoms", "numbers", "positions_angstrom",
             "boundary_margin_angstrom", "paper_supercell_clipped"),
    "cells": ("material", "lattice_angstrom", "numbers", "frac_coords"),
}


def _require_pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise C2NPEnvironmentError("the Parquet export needs pyarrow: pip install 'c2np[export]'") from exc
    return pyarrow


def row_splits(recipes: RecipeTable) -> np.ndarray:
    """(n,) the ``split`` column of the export: ``train`` / ``val`` exactly on the rows a model
    may learn from (:func:`c2np.tasks.example_rows`), ``id`` / ``ood`` on the evaluation
    radii (held-out materials included, as :func:`c2np.tasks.select_rows`), and ``heldout``
    on the training and validation radii of a held-out material."""
    from c2np.tasks import example_rows

    out = np.asarray(SPLITS, dtype=object)[recipes.split].copy()
    trainable = np.zeros(len(recipes), dtype=bool)
    for s in ("train", "val"):
        trainable[example_rows(recipes, s)] = True
    out[np.isin(out, ["train", "val"]) & ~trainable] = "heldout"
    return out


def _metadata(store: DatasetStore, license_id: str) -> dict[str, Any]:
    from c2np.version import __version__

    t = store.recipes
    return {"format": PARQUET_FORMAT, "format_version": PARQUET_FORMAT_VERSION, "fingerprint": store.fingerprint,
            "protocol": t.protocol, "source": store.source, "materials": list(t.materials),
            "heldout_materials": list(t.heldout_materials), "centre_frac": [float(x) for x in t.centre_frac],
            "n_samples": len(t), "c2np_version": __version__, "license": license_id,
            "shards": None if store.manifest is None else [
                {"n_materials": len(e.materials), "row_start": e.row_start, "row_stop": e.row_stop}
                for e in store.manifest.shards]}


def _write(pa: Any, table: Any, path: Path, meta: dict[str, Any]) -> None:
    import pyarrow.parquet as pq

    table = table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
    pq.write_table(table, path, compression="zstd")


def _nested(values: np.ndarray, offsets: np.ndarray, width: int | None, pa: Any, value_type: Any) -> Any:
    """A list<...> arrow array: rows ``values[offsets[i]:offsets[i+1]]``; rows of (n, width)
    become list<list<width values>>."""
    flat = pa.array(np.ascontiguousarray(values).reshape(-1), type=value_type)
    if width is not None:
        flat = pa.ListArray.from_arrays(pa.array(np.arange(0, len(flat) + 1, width, dtype=np.int32)), flat)
    return pa.ListArray.from_arrays(pa.array(np.asarray(offsets, dtype=np.int32)), flat)


def _recipes_table(store: DatasetStore, pa: Any) -> Any:
    t = store.recipes
    held = [t.materials.index(m) for m in t.heldout_materials]
    b = store.base
    bkeys = b.material_index.astype(np.int64) * 100_000 + b.radius_angstrom
    order = np.argsort(bkeys, kind="stable")
    rkeys = t.material_index.astype(np.int64) * 100_000 + t.radius_angstrom
    base_index = order[np.searchsorted(bkeys[order], rkeys)].astype(np.int32)
    return pa.table({
        "sample_id": pa.array(t.sample_ids(), type=pa.string()),
        "material": pa.array(np.asarray(t.materials, dtype=object)[t.material_index], type=pa.string()),
        "material_index": pa.array(t.material_index.astype(np.int32)),
        "radius_angstrom": pa.array(t.radius_angstrom.astype(np.int32)),
        "rotation_index": pa.array(t.rotation_index.astype(np.int32)),
        "quaternion_xyzw": _nested(t.quaternion.astype(np.float64), np.arange(0, 4 * len(t) + 1, 4), None, pa,
                                   pa.float64()),
        "split": pa.array(row_splits(t).tolist(), type=pa.string()),
        "radius_split": pa.array(t.split_names().tolist(), type=pa.string()),
        "heldout_material": pa.array(np.isin(t.material_index, held)),
        "base_index": pa.array(base_index),
    })


def _base_table(store: DatasetStore, pa: Any) -> Any:
    b, t = store.base, store.recipes
    return pa.table({
        "material": pa.array(np.asarray(t.materials, dtype=object)[b.material_index], type=pa.string()),
        "material_index": pa.array(b.material_index.astype(np.int32)),
        "radius_angstrom": pa.array(b.radius_angstrom.astype(np.int32)),
        "n_atoms": pa.array(np.diff(b.offsets).astype(np.int32)),
        "numbers": _nested(b.numbers.astype(np.uint8), b.offsets, None, pa, pa.uint8()),
        "positions_angstrom": _nested(np.asarray(b.positions_angstrom, dtype=np.float32), b.offsets, 3, pa,
                                      pa.float32()),
        "boundary_margin_angstrom": pa.array(np.asarray(b.boundary_margin_angstrom, dtype=np.float64)),
        "paper_supercell_clipped": pa.array(np.asarray(b.paper_supercell_clips, dtype=bool)),
    })


def _cells_table(store: DatasetStore, pa: Any) -> Any:
    cells = [store.cells[m] for m in store.materials]  # the order the fingerprint hashes
    offs = np.concatenate([[0], np.cumsum([c.n_atoms for c in cells])])
    return pa.table({
        "material": pa.array([c.material_id for c in cells], type=pa.string()),
        "lattice_angstrom": _nested(np.stack([c.lattice_angstrom for c in cells]).astype(np.float64),
                                    np.arange(0, 3 * len(cells) + 1, 3), 3, pa, pa.float64()),
        "numbers": _nested(np.concatenate([c.numbers for c in cells]).astype(np.int64), offs, None, pa, pa.int64()),
        "frac_coords": _nested(np.concatenate([c.frac_coords for c in cells]).astype(np.float64), offs, 3, pa,
                               pa.float64()),
    })


def _samples_table(store: DatasetStore, splits: Sequence[str], rotations_per_group: int | None, pa: Any) -> Any:
    from c2np.loaders import LABELLED_SPLITS, iter_items

    cols: dict[str, list[Any]] = {k: [] for k in ("sample_id", "split", "radius_angstrom", "quaternion_xyzw",
                                                  "numbers", "positions_angstrom", "material",
                                                  "lattice_parameters", "spacegroup")}
    for split in splits:
        rpg = rotations_per_group if split in LABELLED_SPLITS else None
        for it in iter_items(store, split, rotations_per_group=rpg):
            cols["sample_id"].append(it["sample_id"])
            cols["split"].append(split)
            cols["radius_angstrom"].append(int(it["radius_angstrom"]))
            cols["quaternion_xyzw"].append(it["quaternion_xyzw"].tolist())
            cols["numbers"].append(it["numbers"].astype(np.uint8).tolist())
            cols["positions_angstrom"].append(it["positions_angstrom"].astype(np.float32).tolist())
            cols["material"].append(it.get("material"))
            cols["lattice_parameters"].append(it["lattice_parameters"].tolist() if "material" in it else None)
            cols["spacegroup"].append(it.get("spacegroup"))
    types = {"sample_id": pa.string(), "split": pa.string(), "radius_angstrom": pa.int32(),
             "quaternion_xyzw": pa.list_(pa.float64()), "numbers": pa.list_(pa.uint8()),
             "positions_angstrom": pa.list_(pa.list_(pa.float32())), "material": pa.string(),
             "lattice_parameters": pa.list_(pa.float64()), "spacegroup": pa.int32()}
    return pa.table({k: pa.array(v, type=types[k]) for k, v in cols.items()})


def export_parquet(store: DatasetStore | str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                   materialise: Sequence[str] = (), rotations_per_group: int | None = None,
                   license_id: str = "mit") -> list[Path]:
    """Write the Parquet export of ``store`` into the folder ``out_dir`` (absent or empty;
    written into a temporary folder and renamed at the end) and return its files.
    ``materialise``: splits whose particles are also written whole (``samples.parquet``;
    :data:`c2np.loaders.LOADER_SPLITS`), ``rotations_per_group`` of each (material, R) of
    ``train`` / ``val`` (all when None). ``license_id``: the licence named in the card."""
    from c2np.dataset_card import dataset_card
    from c2np.loaders import LOADER_SPLITS, as_store

    pa = _require_pyarrow()
    ds = as_store(store)
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise C2NPInputError(f"{out}: already exists and is not an empty folder; choose another --out")
    bad = [s for s in materialise if s not in LOADER_SPLITS]
    if bad:
        raise C2NPInputError(f"--materialise: unknown split {bad[0]!r}; choose from {list(LOADER_SPLITS)}")
    meta = _metadata(ds, license_id)
    tables = {"recipes": _recipes_table(ds, pa), "base": _base_table(ds, pa), "cells": _cells_table(ds, pa)}
    if materialise:
        tables["samples"] = _samples_table(ds, list(dict.fromkeys(materialise)), rotations_per_group, pa)
    with atomic_directory(out) as tmp:
        for name, table in tables.items():
            _write(pa, table, tmp / f"{name}.parquet", meta)
        (tmp / "README.md").write_text(dataset_card(ds, {k: v.num_rows for k, v in tables.items()}, meta,
                                                    materialised=list(materialise)), encoding="utf-8")
    return sorted(out.iterdir())


# ---------------------------------------------------------------------------------------------
# Reading an export back
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ParquetExport:
    """A Parquet export read back: its metadata and the store's parts.

    Attributes:
        path: the export folder.
        metadata: the ``c2np`` schema metadata (format, fingerprint, protocol, ...).
        cells: unit cells in the store's order.
        recipes: the recipe table.
        base: the base particles (float32 positions).
    """

    path: Path
    metadata: dict[str, Any]
    cells: tuple[UnitCell, ...]
    recipes: RecipeTable
    base: BaseParticles

    @property
    def fingerprint(self) -> str:
        """The fingerprint the export records."""
        return str(self.metadata["fingerprint"])

    def check(self, *, executor: Any = None) -> ExportCheck:
        """Recompute the dataset fingerprint from the tables, as ``c2np verify`` does for a
        store: the base particles of a carved dataset are re-carved from the cells and the
        recipes (``executor`` runs the carving), each exported particle must equal its re-carve
        to float32 precision, and the fingerprint (single file or sharded, as recorded) is
        computed over the re-carved positions; an imported dataset is hashed as exported."""
        from c2np.store import carve_base_particles

        problems: list[str] = []
        base = self.base
        if self.metadata.get("source", "carved") == "carved":
            base = carve_base_particles(list(self.cells), self.recipes, progress=False, executor=executor)
            problems += _base_differences(self.base, base, self.recipes.materials)
        fp = _fingerprint(list(self.cells), self.recipes, base, self.metadata.get("shards"))
        if fp != self.fingerprint:
            problems.append(f"fingerprint mismatch: recorded {self.fingerprint[:16]}…, recomputed {fp[:16]}…")
        return ExportCheck(ok=not problems, fingerprint_recorded=self.fingerprint, fingerprint_recomputed=fp,
                           problems=tuple(problems))


@dataclass(frozen=True)
class ExportCheck:
    """What :meth:`ParquetExport.check` found: ``ok`` when nothing differs."""

    ok: bool
    fingerprint_recorded: str
    fingerprint_recomputed: str
    problems: tuple[str, ...]


def _base_differences(exported: BaseParticles, carved: BaseParticles, materials: Sequence[str]) -> list[str]:
    """Problems: exported base particles that differ from their re-carve (species, count, or
    positions beyond twice the float32 spacing)."""
    out = []
    index = carved.index()
    for key, j in exported.index().items():
        label = f"base.parquet: {materials[key[0]]} R={key[1]}"
        jj = index.get(key)
        if jj is None:
            out.append(f"{label}: not in the recipes")
            continue
        (z_e, x_e), (z_c, x_c) = exported.get(j), carved.get(jj)
        if len(z_e) != len(z_c) or not np.array_equal(z_e, z_c):
            out.append(f"{label}: {len(z_e)} exported atoms vs {len(z_c)} re-carved (or species differ)")
            continue
        if len(x_c):
            allowed = 2.0 * np.spacing(np.abs(x_c).astype(np.float32)).astype(np.float64) + 1e-12
            diff = np.abs(np.asarray(x_e, dtype=np.float64) - x_c)
            if np.any(diff > allowed):
                out.append(f"{label}: positions differ from the re-carve by up to {float(diff.max()):.3g} Å")
    if len(index) != len(exported.index()):
        out.append(f"base.parquet: {len(exported.index())} base particles, the recipes need {len(index)}")
    return out


def _fingerprint(cells: list[UnitCell], table: RecipeTable, base: BaseParticles,
                 shards: list[dict[str, int]] | None) -> str:
    """The store fingerprint: single-file, or over the recorded shards (``c2np.store.manifest``)."""
    from c2np.store import fingerprint, shard_base, shard_table
    from c2np.store.manifest import sharded_fingerprint

    if not shards:
        return fingerprint(cells, table, base)
    parts, m0 = [], 0
    for entry in shards:
        m1 = m0 + int(entry["n_materials"])
        fp = fingerprint(cells[m0:m1], shard_table(table, m0, m1), shard_base(base, m0, m1))
        parts.append((int(entry["row_start"]), int(entry["row_stop"]), fp))
        m0 = m1
    return sharded_fingerprint(parts)


def _read_table(path: Path, name: str) -> tuple[Any, dict[str, Any]]:
    pa = _require_pyarrow()
    import pyarrow.parquet as pq

    from c2np.limits import check as check_limit

    p = path / f"{name}.parquet"
    if not p.is_file():
        raise C2NPInputError(f"{p}: missing (an export holds {', '.join(f'{n}.parquet' for n in TABLES)})")
    try:
        md = pq.ParquetFile(p).metadata
        declared = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        check_limit("store_bytes", declared, what=f"{p}: uncompressed size its row groups declare")
        table = pq.read_table(p)
    except C2NPInputError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise C2NPInputError(f"{p}: not a readable Parquet file ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:200]})") from exc
    raw = (table.schema.metadata or {}).get(META_KEY)
    try:
        meta = json.loads(raw) if raw is not None else None
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != PARQUET_FORMAT:
        raise C2NPInputError(f"{p}: not a c2np Parquet export (no {META_KEY.decode()!r} metadata of format "
                             f"{PARQUET_FORMAT!r})")
    if meta.get("format_version") != PARQUET_FORMAT_VERSION:
        raise C2NPInputError(f"{p}: export format version {meta.get('format_version')!r} is not supported "
                             f"(expected {PARQUET_FORMAT_VERSION})")
    missing = [c for c in TABLES[name] if c not in table.column_names]
    if missing:
        raise C2NPInputError(f"{p}: missing column(s) {missing}")
    return table, meta


def _flat(table: Any, column: str, depth: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """(flattened values, row offsets) of a list column nested ``depth`` deep."""
    col = table.column(column).combine_chunks()
    offsets = np.asarray(col.offsets, dtype=np.int64)
    offsets = offsets - offsets[0]
    values = col.flatten()
    for _ in range(depth - 1):
        values = values.flatten()
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=dtype), offsets


def read_parquet_export(path: str | os.PathLike[str]) -> ParquetExport:
    """Read an export folder (:func:`export_parquet`). A missing or damaged file, a table of
    another export, or inconsistent columns raise :class:`C2NPInputError` naming the file."""
    p = Path(path)
    if not p.is_dir():
        raise C2NPInputError(f"{p}: no such export folder")
    recipes, meta = _read_table(p, "recipes")
    base, meta_b = _read_table(p, "base")
    cells, meta_c = _read_table(p, "cells")
    for name, m in (("base", meta_b), ("cells", meta_c)):
        if m.get("fingerprint") != meta.get("fingerprint"):
            raise C2NPInputError(f"{p / (name + '.parquet')}: belongs to another export (fingerprint "
                                 f"{str(m.get('fingerprint'))[:12]}…, recipes.parquet has "
                                 f"{str(meta.get('fingerprint'))[:12]}…)")
    try:
        return _assemble(p, meta, recipes, base, cells)
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise C2NPInputError(f"{p}: inconsistent export tables ({type(exc).__name__}: {exc})") from exc


def _assemble(p: Path, meta: dict[str, Any], recipes: Any, base: Any, cells: Any) -> ParquetExport:
    lat, _ = _flat(cells, "lattice_angstrom", 2, np.float64)
    nums, offs = _flat(cells, "numbers", 1, np.int64)
    frac, _ = _flat(cells, "frac_coords", 2, np.float64)
    names = cells.column("material").to_pylist()
    lat = lat.reshape(len(names), 3, 3)
    frac = frac.reshape(-1, 3)
    cell_list = tuple(UnitCell(m, lat[i], nums[offs[i]:offs[i + 1]], frac[offs[i]:offs[i + 1]])
                      for i, m in enumerate(names))
    quat, _ = _flat(recipes, "quaternion_xyzw", 1, np.float64)
    radius_split = recipes.column("radius_split").to_pylist()
    unknown = sorted(set(radius_split) - set(SPLITS))
    if unknown:
        raise ValueError(f"recipes.parquet: unknown radius_split value(s) {unknown}")
    table = RecipeTable(
        protocol=str(meta["protocol"]), materials=tuple(meta["materials"]),
        material_index=np.asarray(recipes.column("material_index").to_numpy(), dtype=np.int32),
        radius_angstrom=np.asarray(recipes.column("radius_angstrom").to_numpy(), dtype=np.int32),
        rotation_index=np.asarray(recipes.column("rotation_index").to_numpy(), dtype=np.int32),
        quaternion=quat.reshape(-1, 4), split=np.array([SPLITS.index(s) for s in radius_split], dtype=np.int8),
        heldout_materials=tuple(meta["heldout_materials"]),
        centre_frac=tuple(float(x) for x in meta["centre_frac"]))  # type: ignore[arg-type]
    bnums, boffs = _flat(base, "numbers", 1, np.int64)
    bpos, _ = _flat(base, "positions_angstrom", 2, np.float32)
    bb = BaseParticles(
        material_index=np.asarray(base.column("material_index").to_numpy(), dtype=np.int32),
        radius_angstrom=np.asarray(base.column("radius_angstrom").to_numpy(), dtype=np.int32),
        offsets=boffs, numbers=bnums, positions_angstrom=bpos.reshape(-1, 3),
        boundary_margin_angstrom=np.asarray(base.column("boundary_margin_angstrom").to_numpy()),
        paper_supercell_clips=np.asarray(base.column("paper_supercell_clipped").to_numpy(zero_copy_only=False),
                                         dtype=bool))
    if len(bb.positions_angstrom) != len(bnums) or len(quat) != 4 * len(table):
        raise ValueError("list columns have inconsistent lengths")
    return ParquetExport(path=p, metadata=meta, cells=cell_list, recipes=table, base=bb)
