"""Building a store from unit cells: the recipe table of a protocol, the carved base
particles, written as one file (:mod:`c2np.store.write`) or sharded
(:mod:`c2np.store.shards`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from c2np.cells import UnitCell
from c2np.executor import Executor
from c2np.splits import Protocol, build_recipes
from c2np.store.shards import write_sharded_store
from c2np.store.write import carve_base_particles, write_store

__all__ = ["build_store"]


def build_store(cells: Sequence[UnitCell], path: str | os.PathLike[str],
                protocol: Protocol | str = "paper", *,
                radii_angstrom: Sequence[int] | None = None,
                centre_frac: tuple[float, float, float] = (0.0, 0.0, 0.0),
                progress: bool = True, executor: Executor | None = None,
                shards: int | None = None) -> Path:
    """Build recipes and base particles for ``cells`` and write the store atomically;
    ``executor`` carves the base particles (:func:`carve_base_particles`).

    ``shards=K`` writes a sharded store instead (:func:`write_sharded_store`): K HDF5 shards
    and a manifest at :func:`c2np.store.manifest.manifest_path_for` of ``path``, which is
    returned; the K shards are carved and written by K tasks of ``executor``."""
    cells = sorted(cells, key=lambda c: c.material_id)
    table = build_recipes(cells, protocol, radii_angstrom=radii_angstrom, centre_frac=centre_frac)
    if shards is not None:
        return write_sharded_store(path, cells, table, shards, progress=progress, executor=executor)
    base = carve_base_particles(cells, table, progress=progress, executor=executor)
    return write_store(path, cells, table, base)
