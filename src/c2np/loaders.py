"""Loaders over a dataset store: NumPy items, ASE ``Atoms``, a PyTorch ``Dataset`` and
``torch_geometric`` ``Data`` items (torch and torch_geometric are optional and imported
only when those loaders are used).

Every loader takes its rows from the task API (:func:`loader_rows`):

* ``train`` / ``val``: :func:`c2np.tasks.example_rows`, the rows a model may learn from.
  Under a protocol with held-out materials (``strict``) they never hold a held-out
  material, and validation radii are never in ``train``.
* ``id``, ``ood``, ``test``, ``heldout``, ``heldout-dev``, ``heldout-test``: every row of
  the evaluation split (:func:`c2np.tasks.select_rows`, subset ``full``).

Items of ``train`` / ``val`` rows are *labelled*: they carry the material's unit cell and
the task-2 targets (standardized conventional lattice parameters and space group,
:func:`c2np.tasks.inverse_target`). Items of evaluation rows carry neither: on those rows
the cell answers task 2; the task-1 inputs of evaluation rows come from
:meth:`c2np.tasks.ForwardTask.queries`.

Every loader accepts an open :class:`~c2np.store.DatasetStore` or the path of one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from c2np.errors import C2NPEnvironmentError, C2NPInputError
from c2np.splits import RecipeTable
from c2np.store import DatasetStore

__all__ = ["LABELLED_SPLITS", "LOADER_SPLITS", "StoreLike", "as_store", "loader_rows", "iter_items",
           "iter_arrays", "iter_atoms", "torch_dataset", "pyg_dataset", "collate_particles"]

#: splits whose items carry the unit cell and the task-2 targets
LABELLED_SPLITS: tuple[str, ...] = ("train", "val")
#: every split a loader reads
LOADER_SPLITS: tuple[str, ...] = ("train", "val", "id", "ood", "test", "heldout", "heldout-dev", "heldout-test")

StoreLike = DatasetStore | str | os.PathLike[str]


def as_store(store: StoreLike) -> DatasetStore:
    """``store`` itself when open, else the store opened from its path
    (:meth:`DatasetStore.open`: an HDF5 file, a manifest or its folder)."""
    if isinstance(store, DatasetStore):
        return store
    if isinstance(store, (str, os.PathLike)):
        return DatasetStore.open(store)
    raise C2NPInputError(f"a loader needs a DatasetStore or the path of one, got {type(store).__name__}")


def loader_rows(recipes: RecipeTable, split: str = "train", *,
                rotations_per_group: int | None = None) -> np.ndarray:
    """Sorted rows a loader reads for ``split`` (one of :data:`LOADER_SPLITS`): the training
    examples of the task API for ``train`` / ``val`` (``rotations_per_group`` keeps the
    lowest rotation indices of each (material, R)), every row of an evaluation split."""
    from c2np.tasks import example_rows, select_rows

    if split in LABELLED_SPLITS:
        return example_rows(recipes, split, rotations_per_group=rotations_per_group)
    if split not in LOADER_SPLITS:
        raise C2NPInputError(f"unknown split {split!r}; choose one of {list(LOADER_SPLITS)}")
    if rotations_per_group is not None:
        raise C2NPInputError(f"rotations_per_group applies to the training splits {list(LABELLED_SPLITS)}, "
                             f"not {split!r}")
    return select_rows(recipes, split, "full")


def _labels(store: DatasetStore, material: str) -> dict[str, Any]:
    from c2np.tasks import inverse_target

    cell = store.cells[material]
    target = inverse_target(cell)
    return {"material": material,
            "cell_lattice_angstrom": np.array(cell.lattice_angstrom, dtype=np.float64),
            "cell_numbers": np.array(cell.numbers, dtype=np.int64),
            "cell_frac_coords": np.array(cell.frac_coords, dtype=np.float64),
            "lattice_parameters": np.array(target.parameters.as_array(), dtype=np.float64),
            "spacegroup": int(target.spacegroup)}


def _item(store: DatasetStore, row: int, split: str, labelled: bool) -> dict[str, Any]:
    t = store.recipes
    nums, pos = store.particle_arrays(int(row))
    item: dict[str, Any] = {
        "sample_id": t.sample_id(int(row)), "split": split, "numbers": np.asarray(nums, dtype=np.int64),
        "positions_angstrom": pos, "radius_angstrom": float(t.radius_angstrom[row]),
        "rotation_index": int(t.rotation_index[row]),
        "quaternion_xyzw": np.array(t.quaternion[row], dtype=np.float64),
        "centre_frac": np.array(t.centre_frac, dtype=np.float64)}
    if labelled:
        item["material_index"] = int(t.material_index[row])
        item.update(_labels(store, t.materials[int(t.material_index[row])]))
    return item


def iter_items(store: StoreLike, split: str = "train", *,
               rotations_per_group: int | None = None) -> Iterator[dict[str, Any]]:
    """Yield one dict of NumPy values per row of ``split`` (:func:`loader_rows`):
    ``sample_id``, ``split``, ``numbers`` (n,) int64, ``positions_angstrom`` (n, 3) float64 Å,
    ``radius_angstrom``, ``rotation_index``, ``quaternion_xyzw`` (4,) scalar-last, ``centre_frac`` (3,); on
    ``train`` / ``val`` also ``material``, ``material_index``, ``cell_lattice_angstrom``
    (3, 3) Å (rows are lattice vectors), ``cell_numbers`` (m,), ``cell_frac_coords`` (m, 3),
    ``lattice_parameters`` (6,) a, b, c Å and alpha, beta, gamma degrees of the standardized
    conventional cell, and ``spacegroup`` (1..230)."""
    ds = as_store(store)
    labelled = split in LABELLED_SPLITS
    for row in loader_rows(ds.recipes, split, rotations_per_group=rotations_per_group):
        yield _item(ds, int(row), split, labelled)


def iter_arrays(store: StoreLike, split: str = "train") -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Yield (sample_id, numbers (n,), positions (n, 3) Å float64) of the rows of ``split``
    (:func:`loader_rows`)."""
    ds = as_store(store)
    for row in loader_rows(ds.recipes, split):
        nums, pos = ds.particle_arrays(int(row))
        yield ds.recipes.sample_id(int(row)), nums, pos


def iter_atoms(store: StoreLike, split: str = "train") -> Iterator[Any]:
    """Yield non-periodic :class:`ase.Atoms` of the rows of ``split`` with ``info`` holding
    sample_id, radius_angstrom, rotation_index, quaternion_xyzw and split; on ``train`` /
    ``val`` also material, spacegroup and lattice_parameters (a, b, c Å, alpha, beta, gamma
    degrees)."""
    ds = as_store(store)
    t = ds.recipes
    labelled = split in LABELLED_SPLITS
    for row in loader_rows(t, split):
        r = int(row)
        info: dict[str, Any] = {"sample_id": t.sample_id(r), "radius_angstrom": int(t.radius_angstrom[r]),
                                "rotation_index": int(t.rotation_index[r]),
                                "quaternion_xyzw": t.quaternion[r].copy(), "split": split}
        if labelled:
            lab = _labels(ds, t.materials[int(t.material_index[r])])
            info.update({"material": lab["material"], "spacegroup": lab["spacegroup"],
                         "lattice_parameters": lab["lattice_parameters"]})
        yield ds.particle(r).to_ase(info)


def _require_torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise C2NPEnvironmentError("the PyTorch loader needs torch: pip install torch==2.13.0 "
                                   "(or pip install 'c2np[torch]')") from exc
    return torch


def _require_pyg() -> Any:
    try:
        import torch_geometric.data
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise C2NPEnvironmentError("the PyG loader needs torch_geometric: pip install torch_geometric") from exc
    return torch_geometric.data


def _torch_item(torch: Any, item: dict[str, Any]) -> dict[str, Any]:
    out = {"sample_id": item["sample_id"], "split": item["split"],
           "numbers": torch.as_tensor(item["numbers"], dtype=torch.int64),
           "positions": torch.as_tensor(item["positions_angstrom"], dtype=torch.float32),
           "radius_angstrom": item["radius_angstrom"],
           "quaternion": torch.as_tensor(item["quaternion_xyzw"], dtype=torch.float32),
           "centre_frac": torch.as_tensor(item["centre_frac"], dtype=torch.float32)}
    if "spacegroup" in item:
        out.update({"material_index": item["material_index"],
                    "cell": torch.as_tensor(item["cell_lattice_angstrom"], dtype=torch.float32),
                    "cell_numbers": torch.as_tensor(item["cell_numbers"], dtype=torch.int64),
                    "cell_frac": torch.as_tensor(item["cell_frac_coords"], dtype=torch.float32),
                    "lattice": torch.as_tensor(item["lattice_parameters"], dtype=torch.float32),
                    "spacegroup": item["spacegroup"]})
    return out


def _pyg_item(torch: Any, data_cls: Any, item: dict[str, Any]) -> Any:
    t = _torch_item(torch, item)
    fields: dict[str, Any] = {"z": t["numbers"], "pos": t["positions"],
                              "radius": torch.tensor([t["radius_angstrom"]], dtype=torch.float32),
                              "quaternion": t["quaternion"].reshape(1, 4),
                              "centre_frac": t["centre_frac"].reshape(1, 3),
                              "sample_id": t["sample_id"]}
    if "spacegroup" in t:
        fields.update({"cell": t["cell"].reshape(1, 3, 3), "lattice": t["lattice"].reshape(1, 6),
                       "spacegroup": torch.tensor([t["spacegroup"]], dtype=torch.int64),
                       "material_index": torch.tensor([t["material_index"]], dtype=torch.int64),
                       "cell_z": t["cell_numbers"], "cell_frac": t["cell_frac"],
                       "num_cell_atoms": torch.tensor([len(t["cell_numbers"])], dtype=torch.int64)})
    return data_cls(**fields)


def _dataset(store: StoreLike, split: str, rotations_per_group: int | None, convert: Any) -> Any:
    torch = _require_torch()
    ds = as_store(store)
    rows = loader_rows(ds.recipes, split, rotations_per_group=rotations_per_group)
    labelled = split in LABELLED_SPLITS

    class ParticleDataset(torch.utils.data.Dataset):  # type: ignore[name-defined]
        """Samples of a c2np store split (:func:`c2np.loaders.loader_rows`) as tensors."""

        def __len__(self) -> int:
            return int(len(rows))

        def __getitem__(self, i: int) -> Any:
            return convert(_item(ds, int(rows[i]), split, labelled))

    return ParticleDataset()


def torch_dataset(store: StoreLike, split: str = "train", *, rotations_per_group: int | None = None) -> Any:
    """A ``torch.utils.data.Dataset`` over the rows of ``split`` (:func:`loader_rows`). Each
    item is a dict: ``numbers`` (n,) int64, ``positions`` (n, 3) float32 Å,
    ``radius_angstrom`` float, ``quaternion`` (4,) float32 scalar-last, ``centre_frac`` (3,),
    ``sample_id``, ``split``; on ``train`` / ``val`` also ``material_index``, ``cell`` (3, 3)
    Å, ``cell_numbers`` (m,), ``cell_frac`` (m, 3), ``lattice`` (6,) a, b, c Å and alpha,
    beta, gamma degrees (standardized conventional cell) and ``spacegroup`` int. Use
    :func:`collate_particles` as the DataLoader's ``collate_fn``."""
    torch = _require_torch()
    return _dataset(store, split, rotations_per_group, lambda item: _torch_item(torch, item))


def pyg_dataset(store: StoreLike, split: str = "train", *, rotations_per_group: int | None = None) -> Any:
    """A ``torch.utils.data.Dataset`` of ``torch_geometric.data.Data`` items over the rows of
    ``split``: ``z`` (n,), ``pos`` (n, 3) Å, ``radius`` (1,) Å, ``quaternion`` (1, 4),
    ``centre_frac`` (1, 3), ``sample_id``; on ``train`` / ``val`` also ``cell`` (1, 3, 3) Å,
    ``lattice`` (1, 6), ``spacegroup`` (1,), ``material_index`` (1,), ``cell_z`` (m,),
    ``cell_frac`` (m, 3) and ``num_cell_atoms`` (1,). Batch with
    ``torch_geometric.loader.DataLoader``."""
    torch = _require_torch()
    data_cls = _require_pyg().Data
    return _dataset(store, split, rotations_per_group, lambda item: _pyg_item(torch, data_cls, item))


def collate_particles(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Batch ragged :func:`torch_dataset` items: concatenated ``numbers`` / ``positions``
    with a ``batch`` index (N,) and ``ptr`` offsets (B+1,), stacked per-sample fields; on
    labelled items also ``cell`` (B, 3, 3), ``lattice`` (B, 6), ``spacegroup`` (B,),
    ``material_index`` (B,) and the concatenated cell atoms ``cell_numbers`` /
    ``cell_frac`` with ``cell_batch``."""
    torch = _require_torch()
    counts = torch.as_tensor([len(it["numbers"]) for it in items], dtype=torch.int64)
    ptr = torch.zeros(len(items) + 1, dtype=torch.int64)
    ptr[1:] = torch.cumsum(counts, 0)
    out = {"numbers": torch.cat([it["numbers"] for it in items]),
           "positions": torch.cat([it["positions"] for it in items]),
           "batch": torch.repeat_interleave(torch.arange(len(items)), counts),
           "ptr": ptr,
           "radius_angstrom": torch.as_tensor([it["radius_angstrom"] for it in items], dtype=torch.float32),
           "quaternion": torch.stack([it["quaternion"] for it in items]),
           "centre_frac": torch.stack([it["centre_frac"] for it in items]),
           "sample_id": [it["sample_id"] for it in items]}
    if items and all("spacegroup" in it for it in items):
        cell_counts = torch.as_tensor([len(it["cell_numbers"]) for it in items], dtype=torch.int64)
        out.update({"cell": torch.stack([it["cell"] for it in items]),
                    "lattice": torch.stack([it["lattice"] for it in items]),
                    "spacegroup": torch.as_tensor([it["spacegroup"] for it in items], dtype=torch.int64),
                    "material_index": torch.as_tensor([it["material_index"] for it in items]),
                    "cell_numbers": torch.cat([it["cell_numbers"] for it in items]),
                    "cell_frac": torch.cat([it["cell_frac"] for it in items]),
                    "cell_batch": torch.repeat_interleave(torch.arange(len(items)), cell_counts)})
    return out
