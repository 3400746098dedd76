"""The dataset store (contract §5): recipes plus each (material, R) base particle, in one
HDF5 file (or a manifest and its shards).

A dataset is its unit cells plus its recipe table; the particles are a pure function of
those. Modules: :mod:`~c2np.store.layout` (the file layout, :class:`Sample`,
:class:`BaseParticles`, the fingerprint), :mod:`~c2np.store.build` (:func:`build_store`),
:mod:`~c2np.store.write` (single files), :mod:`~c2np.store.shards` (sharded stores),
:mod:`~c2np.store.manifest` (their manifest), :mod:`~c2np.store.read`
(:class:`DatasetStore`), :mod:`~c2np.store.verify` (:func:`verify_store`,
:func:`require_intact`) and :mod:`~c2np.store.stamps` (stores verified on this machine).
Every name below is importable from here.
"""

from __future__ import annotations

from c2np.store.build import build_store
from c2np.store.layout import (
    FORMAT,
    FORMAT_VERSION,
    BaseParticles,
    Sample,
    check_store_names,
    fingerprint,
    quaternions_to_matrices,
)
from c2np.store.read import DatasetStore, check_declared_sizes
from c2np.store.shards import estimated_bytes_per_material, shard_base, shard_table, write_sharded_store
from c2np.store.verify import VerifyReport, require_intact, verify_opened, verify_store
from c2np.store.write import carve_base_particles, write_store

__all__ = ["FORMAT", "FORMAT_VERSION", "Sample", "BaseParticles", "DatasetStore", "build_store",
           "write_store", "fingerprint", "carve_base_particles", "verify_store", "VerifyReport",
           "quaternions_to_matrices", "check_store_names", "check_declared_sizes", "verify_opened",
           "require_intact", "shard_table", "shard_base", "write_sharded_store",
           "estimated_bytes_per_material"]
