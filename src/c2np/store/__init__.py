"""The dataset store (contract §5): recipes plus each (material, R) base particle, in one
HDF5 file (or a manifest and its shards).

A dataset is its unit cells plus its recipe table; the particles are a pure function of
those. Modules: :mod:`~c2np.store.layout` (the file layout, :class:`Sample`,
:class:`BaseParticles`, the fingerprint), :mod:`~c2np.store.build` (:func:`build_store`),
:mod:`~c2np.store.write` (single files), :mod:`~c2np.store.shards` (sharded stores),
:mod:`~c2np.store.manifest` (their manifest), :mod:`~c2np.store.read`
(:class:`DatasetStore`), :mod:`~c2np.store.verify` (:func:`verify_store`,
:func:`require_intact`) and :mod:`~c2np.store.stamps` (stores verified on this machine).
Every name below is importable from here, resolved on first use (a submodule imports only
what it needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from c2np._lazy import lazy_getattr

# name -> the module that defines it (resolved on first use, PEP 562)
_EXPORTS: dict[str, str] = {
    "FORMAT": "c2np.store.layout",
    "FORMAT_VERSION": "c2np.store.layout",
    "Sample": "c2np.store.layout",
    "BaseParticles": "c2np.store.layout",
    "DatasetStore": "c2np.store.read",
    "build_store": "c2np.store.build",
    "write_store": "c2np.store.write",
    "fingerprint": "c2np.store.layout",
    "carve_base_particles": "c2np.store.write",
    "verify_store": "c2np.store.verify",
    "VerifyReport": "c2np.store.verify",
    "quaternions_to_matrices": "c2np.store.layout",
    "check_store_names": "c2np.store.layout",
    "check_declared_sizes": "c2np.store.read",
    "verify_opened": "c2np.store.verify",
    "require_intact": "c2np.store.verify",
    "shard_table": "c2np.store.shards",
    "shard_base": "c2np.store.shards",
    "write_sharded_store": "c2np.store.shards",
    "estimated_bytes_per_material": "c2np.store.shards",
}

__all__ = [*_EXPORTS]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
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


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
