"""Loaders over a dataset store: plain NumPy iteration, ASE ``Atoms``, and a PyTorch
``Dataset`` (torch is optional and imported only when that loader is used)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from c2np.errors import C2NPError
from c2np.store import DatasetStore

__all__ = ["iter_arrays", "iter_atoms", "torch_dataset", "collate_particles"]


def iter_arrays(store: DatasetStore, split: str | None = None) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Yield (sample_id, numbers (n,), positions (n, 3) Å float64) for a split (all when None)."""
    ids = store.recipes.sample_ids()
    for row in store.rows(split):
        nums, pos = store.particle_arrays(int(row))
        yield ids[row], nums, pos


def iter_atoms(store: DatasetStore, split: str | None = None) -> Iterator[Any]:
    """Yield non-periodic :class:`ase.Atoms` with ``info`` holding sample_id, material,
    radius_angstrom, rotation_index, quaternion_xyzw and split."""
    for row in store.rows(split):
        s = store.sample(int(row))
        yield s.particle.to_ase({"sample_id": s.sample_id, "material": s.material,
                                 "radius_angstrom": s.radius_angstrom, "rotation_index": s.rotation_index,
                                 "quaternion_xyzw": s.quaternion, "split": s.split})


def _require_torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise C2NPError("the PyTorch loader needs torch: pip install torch==2.13.0 "
                        "(or pip install 'c2np[torch]')") from exc
    return torch


def torch_dataset(store: DatasetStore, split: str | None = None) -> Any:
    """A ``torch.utils.data.Dataset`` over a split. Each item is a dict with ``numbers``
    (n,) int64, ``positions`` (n, 3) float32 Å, ``radius_angstrom`` float, ``quaternion``
    (4,) float32, ``material_index`` int and ``sample_id`` str. Use
    :func:`collate_particles` as the DataLoader's ``collate_fn`` to batch ragged particles."""
    torch = _require_torch()
    rows = store.rows(split)
    table = store.recipes
    ids = table.sample_ids()

    class ParticleDataset(torch.utils.data.Dataset):  # type: ignore[name-defined]
        """Samples of a c2np store as tensors."""

        def __len__(self) -> int:
            return int(len(rows))

        def __getitem__(self, i: int) -> dict[str, Any]:
            row = int(rows[i])
            nums, pos = store.particle_arrays(row)
            return {"numbers": torch.as_tensor(nums, dtype=torch.int64),
                    "positions": torch.as_tensor(pos, dtype=torch.float32),
                    "radius_angstrom": float(table.radius_angstrom[row]),
                    "quaternion": torch.as_tensor(table.quaternion[row], dtype=torch.float32),
                    "material_index": int(table.material_index[row]),
                    "sample_id": ids[row]}

    return ParticleDataset()


def collate_particles(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Batch ragged particles: concatenated ``numbers``/``positions`` with a ``batch`` index
    (N,) and ``ptr`` offsets (B+1,), stacked per-sample fields."""
    torch = _require_torch()
    counts = [len(it["numbers"]) for it in items]
    ptr = torch.zeros(len(items) + 1, dtype=torch.int64)
    ptr[1:] = torch.cumsum(torch.as_tensor(counts, dtype=torch.int64), 0)
    return {"numbers": torch.cat([it["numbers"] for it in items]),
            "positions": torch.cat([it["positions"] for it in items]),
            "batch": torch.repeat_interleave(torch.arange(len(items)), torch.as_tensor(counts)),
            "ptr": ptr,
            "radius_angstrom": torch.as_tensor([it["radius_angstrom"] for it in items], dtype=torch.float32),
            "quaternion": torch.stack([it["quaternion"] for it in items]),
            "material_index": torch.as_tensor([it["material_index"] for it in items]),
            "sample_id": [it["sample_id"] for it in items]}
