"""The sealed test: the held-out materials of a protocol split into development and test.

Protocol ``strict`` holds out whole materials. They are split in two:

* ``heldout-dev``: materials development may look at (gates, ablations, sweeps, diagnosis,
  choosing a model). Every material listed in the package file
  ``data/development_materials.json`` (held-out materials already looked at) is a development
  material; of the others, a seeded half (by SHA-256 of ``seed:name``; the larger half when
  their number is odd) is.
* ``heldout-test``: the rest. They are scored once per shipped model, for reporting; every
  script that chooses anything refuses them (:func:`require_development_split`).

``heldout`` stays the union of both (a submission answers every held-out row in one file).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from c2np.errors import C2NPInputError

__all__ = ["HELDOUT_SPLITS", "SEALED_SPLIT", "DEV_SPLIT", "HeldoutParts", "development_materials",
           "heldout_parts", "require_development_split"]

DEV_SPLIT = "heldout-dev"
SEALED_SPLIT = "heldout-test"
HELDOUT_SPLITS: tuple[str, ...] = ("heldout", DEV_SPLIT, SEALED_SPLIT)
PARTITION_SEED = 11


@lru_cache(maxsize=1)
def development_materials() -> frozenset[str]:
    """Held-out materials that development has looked at (package data, read once)."""
    from importlib.resources import files

    doc = json.loads((files("c2np") / "data" / "development_materials.json").read_text(encoding="utf-8"))
    return frozenset(str(m) for m in doc["materials"])


@dataclass(frozen=True)
class HeldoutParts:
    """The held-out materials of a protocol, split: ``dev`` and ``test`` (sorted names)."""

    dev: tuple[str, ...]
    test: tuple[str, ...]

    def materials(self, split: str) -> tuple[str, ...]:
        """The materials of ``heldout``, ``heldout-dev`` or ``heldout-test``."""
        if split == DEV_SPLIT:
            return self.dev
        if split == SEALED_SPLIT:
            return self.test
        return tuple(sorted(self.dev + self.test))


def _rank(name: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()


def heldout_parts(heldout_materials: Sequence[str], *, seed: int = PARTITION_SEED,
                  exposed: frozenset[str] | None = None) -> HeldoutParts:
    """Split ``heldout_materials``: the ``exposed`` ones (default
    :func:`development_materials`) are development materials; the others are ordered by
    SHA-256 of ``seed:name`` and the first half (rounded up) joins them, the rest is test."""
    seen = development_materials() if exposed is None else exposed
    fresh = sorted((m for m in set(heldout_materials) if m not in seen), key=lambda m: _rank(m, seed))
    n_dev = (len(fresh) + 1) // 2
    dev = sorted([m for m in set(heldout_materials) if m in seen] + fresh[:n_dev])
    return HeldoutParts(dev=tuple(dev), test=tuple(sorted(fresh[n_dev:])))


def require_development_split(split: str, *, purpose: str = "a selection") -> str:
    """``split`` itself when development may use it; :class:`C2NPInputError` for
    ``heldout-test`` (the sealed test) and ``heldout`` (which contains it)."""
    if split in (SEALED_SPLIT, "heldout"):
        raise C2NPInputError(f"split {split!r} contains the sealed test materials ({SEALED_SPLIT}); "
                             f"{purpose} may use training, validation and {DEV_SPLIT!r} rows only")
    return split
