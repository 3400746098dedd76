"""A pool of task-2 crystal generators: every member proposes its read-out candidate cells
for a particle (:meth:`CrystalGenerator.candidates`, each with its own settings and seed), and
one rule chooses among all of them (:func:`c2np.models.inverse.choice.choose_candidate`: the
smallest pair-profile mismatch, with the pool's symmetric margins).

An ensemble of learned generators, never a family of its own: its rows are labelled as a
pool of its members. Where members fail on different materials (one family's cells refine
into the right structure where another's do not), the pair profile, which reads the
particle only, chooses between them.

A pool folder (:func:`save_pool`, :func:`load_pool`) holds ``pool.json``: the choice rule and,
per member, its name, the path of its generator folder relative to the pool folder (e.g.
``../diffcsp-inverse``: the pool names its members, it never copies their weights) and the
settings the pool overrides in that member's configuration (e.g. ``crop_radii_angstrom: []``).
A member folder must lie inside the pool folder's parent (or the ``members_root`` given to
:func:`load_pool`), and its files must be regular files there (:func:`resolve_member_folder`).
Pool folders of the first layout (kind ``c2np.generator_pool/1``: byte copies of the members
under ``members/``) still load.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
from c2np.terminal import printable

__all__ = ["PoolRule", "PoolMember", "GeneratorPool", "POOL_FILE", "POOL_KIND", "save_pool", "load_pool",
           "read_pool_members", "resolve_member_folder", "load_inverse_generator"]

POOL_FILE = "pool.json"
POOL_KIND = "c2np.generator_pool/2"
#: the first layout: byte copies of the members under ``members/<name>/`` (still read)
POOL_KIND_COPIES = "c2np.generator_pool/1"
MEMBERS_DIR = "members"
#: the files of a member folder the pool reads (each must be a regular file in the folder)
MEMBER_FILES = ("config.json", "model.safetensors", "templates.json")


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


# --- the pool folder's members: named folders, resolved safely --------------------------------

#: configuration fields that shape the network: a pool may not override them in a member
_NETWORK_FIELDS = frozenset({"process", "hidden", "layers", "n_freq", "pair_readout", "lattice_param", "spacegroups"})


@dataclass(frozen=True)
class PoolMember:
    """One member of a pool folder.

    Attributes:
        name: the member's name in the pool (tags its candidates).
        path: its generator folder, relative to the pool folder (POSIX separators).
        config: :class:`~c2np.models.inverse.config.GenConfig` fields the pool sets in the
            member's own configuration (sampling and read-out settings only).
    """

    name: str
    path: str
    config: Mapping[str, Any] = field(default_factory=dict)


def _member_name_ok(name: object) -> bool:
    return isinstance(name, str) and bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")


def read_pool_members(doc: Mapping[str, Any], *, where: str = POOL_FILE) -> list[PoolMember]:
    """The members a ``pool.json`` document names (both layouts; see the module); a malformed
    entry is one :class:`~c2np.errors.C2NPInputError` naming ``where`` and the entry."""
    entries = doc.get("members")
    if not isinstance(entries, list):
        raise C2NPInputError(f"{where}: 'members' must be a list")
    if doc.get("kind") == POOL_KIND_COPIES:
        if not all(_member_name_ok(n) for n in entries):
            raise C2NPInputError(f"{where}: 'members' must be a list of member folder names")
        return [PoolMember(n, f"{MEMBERS_DIR}/{n}") for n in entries]
    out = []
    for k, e in enumerate(entries):
        if not (isinstance(e, dict) and set(e) <= {"name", "path", "config"} and _member_name_ok(e.get("name"))
                and isinstance(e.get("path"), str) and e["path"] and isinstance(e.get("config", {}), dict)):
            raise C2NPInputError(f"{where}: members[{k}] must be an object with a plain 'name', a relative "
                                 "'path' and optionally a 'config' object")
        fixed = sorted(set(e.get("config", {})) & _NETWORK_FIELDS)
        if fixed:
            raise C2NPInputError(f"{where}: members[{k}] ({e['name']}): a pool may not override the network's "
                                 f"own fields ({', '.join(fixed)})")
        out.append(PoolMember(e["name"], e["path"], dict(e.get("config", {}))))
    return out


def resolve_member_folder(pool_folder: str | Path, member_path: str, *,
                          members_root: str | Path | None = None) -> Path:
    """The generator folder ``member_path`` (relative to ``pool_folder``) names, checked before
    anything in it is read: an absolute path, a folder that resolves (links followed) outside
    ``members_root`` (default: the pool folder's parent) and a member file
    (:data:`MEMBER_FILES`) that is not a regular file inside the member folder are each one
    :class:`~c2np.errors.C2NPInputError`."""
    from c2np.fileio import regular_file_in

    pool = Path(pool_folder)
    rel = Path(member_path)
    if rel.is_absolute() or "\\" in member_path:
        raise C2NPInputError(f"{pool / POOL_FILE}: member path {member_path!r} must be relative to the pool folder")
    root = os.path.realpath(members_root if members_root is not None else os.path.dirname(os.path.realpath(pool)))
    folder = pool / rel
    real = os.path.realpath(folder)
    if os.path.commonpath([root, real]) != root:
        raise C2NPInputError(f"{pool / POOL_FILE}: member path {member_path!r} leads outside {root}; "
                             "a pool reads members only beside it (or under the members root given)")
    if not os.path.isdir(real):
        raise C2NPInputError(f"{pool / POOL_FILE}: member folder {member_path!r} does not exist")
    for name in MEMBER_FILES:
        f = folder / name
        if name == "templates.json" and not os.path.lexists(f):
            continue
        try:
            regular_file_in(folder, f, what=f"member file {name}")
        except FileNotFoundError:
            raise C2NPInputError(f"{f}: missing (member {member_path!r} of {pool / POOL_FILE})") from None
    return folder


def _load_member(pool_folder: Path, member: PoolMember, members_root: str | Path | None) -> CrystalGenerator:
    """The member's generator, with the pool's settings applied to its configuration."""
    gen = load_generator(resolve_member_folder(pool_folder, member.path, members_root=members_root))
    if member.config:
        try:
            gen.cfg = dataclasses.replace(gen.cfg, **member.config)
        except TypeError as exc:
            raise C2NPInputError(f"{pool_folder / POOL_FILE}: member {member.name!r}: 'config' names a field "
                                 f"this version does not know ({exc})") from exc
    return gen


def save_pool(folder: str | Path, members: Sequence[tuple[str, str | Path]], rule: PoolRule, *,
              member_configs: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    """Write a pool folder: ``pool.json`` with the rule and, per member, its name, the path of
    its generator folder relative to ``folder`` and the settings ``member_configs[name]`` the
    pool overrides in it. The member folders must lie inside ``folder``'s parent; each is
    loaded first, so a broken member fails here, not at prediction."""
    from c2np.fileio import write_text

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, src in members:
        if not _member_name_ok(name):
            raise C2NPInputError(f"generator pool: member name {name!r} is not a plain folder name")
        rel = Path(os.path.relpath(os.path.realpath(src), os.path.realpath(out))).as_posix()
        entry: dict[str, Any] = {"name": name, "path": rel}
        if member_configs and member_configs.get(name):
            entry["config"] = dict(member_configs[name])
        _load_member(out, read_pool_members({"kind": POOL_KIND, "members": [entry]})[0], None)
        entries.append(entry)
    doc = {"kind": POOL_KIND, "members": entries, "rule": dataclasses.asdict(rule)}
    write_text(out / POOL_FILE, json.dumps(doc, indent=2) + "\n")
    return out


def load_pool(folder: str | Path, *, members_root: str | Path | None = None) -> GeneratorPool:
    """A pool written by :func:`save_pool`; a malformed ``pool.json`` or member folder is one
    :class:`~c2np.errors.C2NPInputError` naming the file and the problem. Member folders must
    lie inside ``members_root`` (default: the pool folder's parent)."""
    p = Path(folder)
    doc = read_pool_doc(p)
    members = read_pool_members(doc, where=printable(p / POOL_FILE))
    return GeneratorPool([(m.name, _load_member(p, m, members_root)) for m in members], PoolRule(**doc["rule"]))


#: Most members of one pool.
MAX_MEMBERS = 64


def _pool_schema() -> dict[str, Any]:
    """The schema (:mod:`c2np.structured`) of ``pool.json``, both layouts: the types and
    ranges of every field (a member's ``config`` against the generator configuration's
    schema); the shape of a member entry is checked by :func:`read_pool_members`."""
    from c2np.models.schemas import GEN_CONFIG_SCHEMA

    member = {"type": ["string", "object"], "maxLength": 255,
              "properties": {"name": {"type": "string", "maxLength": 255},
                             "path": {"type": "string", "maxLength": 4096}, "config": GEN_CONFIG_SCHEMA}}
    return {"type": "object", "required": ["kind", "members", "rule"],
            "properties": {"kind": {"enum": [POOL_KIND, POOL_KIND_COPIES]},
                           "members": {"type": "array", "maxItems": MAX_MEMBERS, "items": member},
                           "rule": {"type": "object", "additionalProperties": False, "properties": {
                               f.name: {"type": "number", "minimum": 0} for f in dataclasses.fields(PoolRule)}}}}


def read_pool_doc(folder: str | Path) -> dict[str, Any]:
    """A pool folder's ``pool.json``: a regular file inside the folder, read by the guarded
    reader (:mod:`c2np.structured`) and checked against :func:`_pool_schema` (every problem
    names the file and the field)."""
    from c2np.models.runfiles import read_json

    p = Path(folder)
    return read_json(p / POOL_FILE, what="generator pool", folder=p, schema=_pool_schema())


def load_inverse_generator(folder: str | Path) -> CrystalGenerator | GeneratorPool:
    """A generator folder (:func:`~c2np.models.inverse.io.load_generator`) or a pool folder
    (:func:`load_pool`, recognised by its ``pool.json``)."""
    import os

    p = Path(folder)
    return load_pool(p) if os.path.lexists(p / POOL_FILE) else load_generator(p)
