"""A pool of task-2 crystal generators: every member proposes its read-out candidate cells
for a particle (:meth:`CrystalGenerator.candidates`, each with its own settings and seed), and
one rule chooses among all of them (:func:`c2np.models.inverse.choice.choose_candidate`: the
smallest pair-profile mismatch, with the pool's symmetric margins).

An ensemble of learned generators, never a family of its own: its rows are labelled as a
pool of its members. Where members fail on different materials (one family's cells refine
into the right structure where another's do not), the pair profile, which reads the
particle only, chooses between them.

A pool folder (:func:`save_pool`, :func:`load_pool`) holds ``pool.json`` and one generator
folder per member under ``members/`` (self-contained: the weights that were evaluated).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError
from c2np.models.inverse.choice import Candidate, choose_candidate
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.io import load_generator
from c2np.models.inverse.ranking import particle_pair_profile
from c2np.particle import Particle
from c2np.particle_descriptor import ParticleDescriptor, describe, position_noise_angstrom
from c2np.predictions import InversePrediction

__all__ = ["PoolRule", "GeneratorPool", "POOL_FILE", "POOL_KIND", "save_pool", "load_pool",
           "load_inverse_generator"]

POOL_FILE = "pool.json"
POOL_KIND = "c2np.generator_pool/1"
MEMBERS_DIR = "members"


@dataclass(frozen=True)
class PoolRule:
    """How a pool chooses among its members' candidates (:func:`choose_candidate` with
    ``rule="refine"``): candidates with atoms closer than ``min_pair_angstrom`` (Å) count only
    when none is valid; of those within ``symmetric_margin + symmetric_margin_per_angstrom x
    noise`` of the smallest mismatch, the one whose template has the most operations."""

    min_pair_angstrom: float = 0.7
    symmetric_margin: float = 0.01
    symmetric_margin_per_angstrom: float = 8.0

    def __post_init__(self) -> None:
        for k, v in dataclasses.asdict(self).items():
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0):
                raise C2NPInputError(f"pool rule: {k} must be a finite number >= 0, got {v!r}")


class GeneratorPool:
    """Crystal generators whose candidates are chosen among together (see the module).

    Args:
        members: (name, generator) pairs, each generator ranking its candidates by their
            pair-profile mismatch (``rank`` ``profile``, ``stretch`` or ``refine``).
        rule: the choice among all candidates.
    """

    def __init__(self, members: Sequence[tuple[str, CrystalGenerator]], rule: PoolRule) -> None:
        if len(members) < 2:
            raise C2NPInputError(f"a generator pool needs at least two members, got {len(members)}")
        names = [n for n, _ in members]
        if len(set(names)) != len(names):
            raise C2NPInputError(f"generator pool: member names repeat: {names}")
        for name, gen in members:
            if gen.cfg.rank == "vote":
                raise C2NPInputError(f"generator pool: member {name!r} votes (rank 'vote'); a pool "
                                     "compares candidates by their pair-profile mismatch")
        self.members = tuple(members)
        self.rule = rule

    @property
    def needs_noise(self) -> bool:
        """Whether :meth:`choose` reads the particle's noise estimate."""
        return self.rule.symmetric_margin_per_angstrom > 0

    def candidates(self, descs: Sequence[ParticleDescriptor], *, seed: int = 0, batch: int = 256,
                   profiles: Sequence[np.ndarray] | None = None,
                   particles: Sequence[Particle] | None = None) -> list[list[Candidate]]:
        """Every member's candidates of each particle (members in order, each exactly what
        the member alone gives with this seed), each tagged with its member's name
        (``particles``: for members conditioned on central crops, ``crop_radii_angstrom``)."""
        if profiles is None:
            raise C2NPInputError("a generator pool needs the particles' pair profiles (use predict_particles)")
        out: list[list[Candidate]] = [[] for _ in descs]
        for name, gen in self.members:
            for row, cands in zip(out, gen.candidates(descs, seed=seed, batch=batch, profiles=profiles,
                                                              particles=particles),
                                  strict=True):
                row.extend(dataclasses.replace(c, generator=name) for c in cands)
        return out

    def choose(self, cands: Sequence[Candidate], *, noise_angstrom: float = 0.0) -> InversePrediction | None:
        """The answer of one particle from its pooled :meth:`candidates` (None: no candidate)."""
        return choose_candidate(cands, rule="refine", min_pair_angstrom=self.rule.min_pair_angstrom,
                                symmetric_margin=self.rule.symmetric_margin,
                                symmetric_margin_per_angstrom=self.rule.symmetric_margin_per_angstrom,
                                noise_angstrom=noise_angstrom)

    def predict_particles(self, particles: Sequence[Particle], *, seed: int = 0, batch: int = 256
                          ) -> list[InversePrediction | None]:
        """Predictions for particles (their descriptors, pair profiles and noise estimates
        computed here); None where no member could read a cell."""
        descs = [describe(p) for p in particles]
        profiles = [particle_pair_profile(p, d) for p, d in zip(particles, descs)]
        noise = [position_noise_angstrom(p) for p in particles] if self.needs_noise else [0.0] * len(particles)
        cands = self.candidates(descs, seed=seed, batch=batch, profiles=profiles, particles=particles)
        return [self.choose(c, noise_angstrom=s) for c, s in zip(cands, noise, strict=True)]


def save_pool(folder: str | Path, members: Sequence[tuple[str, str | Path]], rule: PoolRule) -> Path:
    """Write a pool folder: ``pool.json`` (the rule and the member names) and a byte copy of
    each member's generator folder (``config.json``, ``model.safetensors``, templates,
    README) under ``members/<name>/``. Each member folder is loaded first, so a broken member
    fails here, not at prediction."""
    from c2np.fileio import atomic_write, write_text

    out = Path(folder)
    names = []
    for name, src in members:
        if not name or "/" in name or name.startswith("."):
            raise C2NPInputError(f"generator pool: member name {name!r} is not a plain folder name")
        load_generator(src)
        dst = out / MEMBERS_DIR / name
        dst.mkdir(parents=True, exist_ok=True)
        for f in sorted(Path(src).iterdir()):
            if f.is_file() and not f.is_symlink() and f.name != "train_log.jsonl":
                with atomic_write(dst / f.name, "wb") as fh:
                    fh.write(f.read_bytes())
        names.append(name)
    doc = {"kind": POOL_KIND, "members": names, "rule": dataclasses.asdict(rule)}
    write_text(out / POOL_FILE, json.dumps(doc, indent=2) + "\n")
    return out


def load_pool(folder: str | Path) -> GeneratorPool:
    """A pool written by :func:`save_pool`; a malformed ``pool.json`` or member folder is one
    :class:`~c2np.errors.C2NPInputError` naming the file and the problem."""
    p = Path(folder)
    doc = read_pool_doc(p)
    return GeneratorPool([(n, load_generator(p / MEMBERS_DIR / n)) for n in doc["members"]],
                         PoolRule(**doc["rule"]))


#: Most members of one pool.
MAX_MEMBERS = 64

#: The schema (:mod:`c2np.structured`) of ``pool.json``.
POOL_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["kind", "members", "rule"], "additionalProperties": False,
    "properties": {
        "kind": {"const": POOL_KIND},
        "members": {"type": "array", "minItems": 2, "maxItems": MAX_MEMBERS, "uniqueItems": True,
                    "items": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[^./][^/]*$"}},
        "rule": {"type": "object", "additionalProperties": False, "properties": {
            f.name: {"type": "number", "minimum": 0} for f in dataclasses.fields(PoolRule)}},
    },
}


def read_pool_doc(folder: str | Path) -> dict[str, Any]:
    """A pool folder's ``pool.json``: a regular file inside the folder, read by the guarded
    reader (:mod:`c2np.structured`) and checked against :data:`POOL_SCHEMA` (every problem
    names the file and the field)."""
    from c2np.models.runfiles import read_json

    p = Path(folder)
    return read_json(p / POOL_FILE, what="generator pool", folder=p, schema=POOL_SCHEMA)


def load_inverse_generator(folder: str | Path) -> CrystalGenerator | GeneratorPool:
    """A generator folder (:func:`~c2np.models.inverse.io.load_generator`) or a pool folder
    (:func:`load_pool`, recognised by its ``pool.json``)."""
    import os

    p = Path(folder)
    return load_pool(p) if os.path.lexists(p / POOL_FILE) else load_generator(p)
