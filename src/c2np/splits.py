"""Protocols and the recipe table (contract §4-5): which (material, R, rotation) samples exist
and which split each belongs to.

Protocol ``paper`` reproduces the original generator exactly; protocol ``strict`` measures
separations modulo the crystal's rotational site symmetry, keeps the identity only in
train, validates on held-out train radii and holds out ~20 % of materials for task 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from c2np.cells import UnitCell, standardize
from c2np.errors import C2NPInputError
from c2np.orientations import min_separation_deg, n_rotations, sample_orientations, site_rotation_group

__all__ = ["Protocol", "PAPER", "STRICT", "STRICT_STRUCTURE", "PROTOCOLS", "heldout_materials_of",
           "get_protocol", "RecipeTable",
           "build_recipes", "SPLITS", "sample_id", "radius_roles", "format_radii", "describe_radii",
           "no_training_rows_message"]

SPLITS: tuple[str, ...] = ("train", "val", "id", "ood")


@dataclass(frozen=True)
class Protocol:
    """Settings of a split protocol. Angles in degrees, radii in Å."""

    name: str
    radii_angstrom: tuple[int, ...] = tuple(range(6, 31))
    id_radii_angstrom: tuple[int, ...] = (10, 11, 17, 21, 24, 26)
    ood_radii_angstrom: tuple[int, ...] = (6, 7, 29, 30)
    theta_train_deg: float = 15.0
    theta_id_deg: float = 12.0
    theta_ood_deg: float = 9.0
    train_seed: int = 1337
    offset_id_euler_xyz_deg: tuple[float, float, float] = (6.0, 8.0, 12.0)
    offset_ood_euler_xyz_deg: tuple[float, float, float] = (15.0, 25.0, 35.0)
    margin_id_deg: float = 6.0
    margin_ood_deg: float = 4.5
    max_trials_train: int = 200_000
    max_trials_test: int = 300_000
    val_fraction: float = 0.2
    val_seed: int = 2024
    modulo_symmetry: bool = False
    identity_outside_train: bool = True
    val_radii_angstrom: tuple[int, ...] = ()
    heldout_material_fraction: float = 0.0
    heldout_seed: int = 7
    catalog_scope: str = "abh3"
    heldout_structure_types: tuple[str, ...] = ()

    @property
    def train_radii_angstrom(self) -> tuple[int, ...]:
        """Radii that are neither ID nor OOD test radii (validation radii included)."""
        test = set(self.id_radii_angstrom) | set(self.ood_radii_angstrom)
        return tuple(r for r in self.radii_angstrom if r not in test)

    def radius_split(self, radius: int) -> str:
        """'train', 'val', 'id' or 'ood' by radius alone (val only for held-out val radii)."""
        if radius in self.ood_radii_angstrom:
            return "ood"
        if radius in self.id_radii_angstrom:
            return "id"
        if radius in self.val_radii_angstrom:
            return "val"
        return "train"

    def test_seed(self, radius: int, theta_deg: float) -> int:
        """The original's per-radius seed int(1000 + R + θ)."""
        return int(1000 + radius + theta_deg)


PAPER = Protocol(name="paper")
STRICT = Protocol(name="strict", modulo_symmetry=True, identity_outside_train=False,
                  val_radii_angstrom=(13, 23), val_fraction=0.0, heldout_material_fraction=0.2)
#: ``strict`` on the whole catalog with whole structure types held out: the a-a-a- tilt
#: (perovskite R-3c and its double-perovskite variant R-3), the 6H polytype (2H, 4H and
#: 9R are seen) and the K2PtCl6 type (isolated octahedra: a topology no training type has);
#: of the other types, ~20 % of the materials per space group (:func:`heldout_materials_of`).
STRICT_STRUCTURE = Protocol(name="strict-structure", modulo_symmetry=True, identity_outside_train=False,
                            val_radii_angstrom=(13, 23), val_fraction=0.0, heldout_material_fraction=0.2,
                            catalog_scope="all",
                            heldout_structure_types=("perovskite-R-3c", "DP-R-3", "6H", "K2PtCl6"))
PROTOCOLS: dict[str, Protocol] = {"paper": PAPER, "strict": STRICT, "strict-structure": STRICT_STRUCTURE}


def get_protocol(name: str) -> Protocol:
    """Protocol by name; unknown names raise :class:`C2NPInputError`."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise C2NPInputError(f"unknown protocol {name!r}; choose one of {sorted(PROTOCOLS)}") from None


def radius_roles(proto: Protocol, radii_angstrom: Iterable[int] | None = None) -> dict[str, tuple[int, ...]]:
    """The radii (Å) of each role under ``proto``: ``train`` (radii models fit on), ``val``
    (validation radii; under ``paper`` none: validation is a share of the training rotations),
    ``id`` and ``ood`` (test radii); restricted to ``radii_angstrom`` (a store's) when given."""
    keep = set(proto.radii_angstrom if radii_angstrom is None else (int(r) for r in radii_angstrom))
    roles: dict[str, tuple[int, ...]] = {"train": (), "val": (), "id": (), "ood": ()}
    for r in proto.radii_angstrom:
        if r in keep:
            split = proto.radius_split(r)
            roles[split] = (*roles[split], r)
    return roles


def format_radii(radii: Iterable[int]) -> str:
    """``6, 7, 10, 11, 12`` -> ``"6-7, 10-12"``; ``"none"`` when empty."""
    rs = sorted({int(r) for r in radii})
    if not rs:
        return "none"
    runs: list[list[int]] = [[rs[0], rs[0]]]
    for r in rs[1:]:
        if r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def describe_radii(proto: Protocol, radii_angstrom: Iterable[int] | None = None, *,
                   n_heldout_materials: int | None = None) -> str:
    """One line naming the radii of each role (:func:`radius_roles`), e.g. ``protocol paper:
    training radii 8-9, 12-16, ... Å (validation: 20 % of their rotations), ID 10-11, ... Å,
    OOD 6-7, 29-30 Å``; with ``radii_angstrom``, those of a store; under ``strict`` the
    validation radii and the count of held-out materials."""
    roles = radius_roles(proto, radii_angstrom)

    def text(radii: tuple[int, ...]) -> str:
        return f"{format_radii(radii)} Å" if radii else "none"

    if proto.val_radii_angstrom:
        val = f"validation radii {text(roles['val'])}"
    else:
        val = f"validation: {round(100 * proto.val_fraction)} % of the training rotations"
    held = ""
    if n_heldout_materials is not None and proto.heldout_material_fraction > 0:
        held = f", {n_heldout_materials} held-out materials (task 2: heldout-dev / heldout-test)"
    return (f"protocol {proto.name}: training radii {text(roles['train'])} ({val}), "
            f"ID {text(roles['id'])}, OOD {text(roles['ood'])}{held}")


def no_training_rows_message(proto: Protocol, radii_angstrom: Iterable[int], *, n_materials: int,
                             n_heldout_materials: int) -> str:
    """Why a store has no training rows, and which radii it would need."""
    radii = sorted({int(r) for r in radii_angstrom})
    train = radius_roles(proto)["train"]
    if not radius_roles(proto, radii)["train"]:
        return (f"the store has no training rows: its radii {format_radii(radii)} Å include none of "
                f"protocol {proto.name}'s training radii ({format_radii(train)} Å); build a store with "
                f"some of them (c2np build --radii ...)")
    return (f"the store has no training rows: all {n_materials} of its materials are held out "
            f"({n_heldout_materials} held-out materials under protocol {proto.name})")


def sample_id(material_id: str, radius: int, rotation_index: int) -> str:
    """The id of a sample, mirroring the original layout: ``{material}/R{r}/rot_{k}``."""
    return f"{material_id}/R{int(radius)}/rot_{int(rotation_index)}"


@dataclass(frozen=True, eq=False)
class RecipeTable:
    """Columnar table of recipes (one row per sample).

    Attributes:
        protocol: protocol name.
        materials: material ids; ``material_index`` points into it.
        material_index: (n,) int32.
        radius_angstrom: (n,) int32 sphere radii.
        rotation_index: (n,) int32, 0 is the identity where present.
        quaternion: (n, 4) float64 scalar-last canonical quaternions.
        split: (n,) int8 index into :data:`SPLITS`.
        heldout_materials: materials reserved for task-2 testing (strict protocol).
        centre_frac: (3,) carving centre in fractional coordinates.
    """

    protocol: str
    materials: tuple[str, ...]
    material_index: np.ndarray
    radius_angstrom: np.ndarray
    rotation_index: np.ndarray
    quaternion: np.ndarray
    split: np.ndarray
    heldout_materials: tuple[str, ...] = ()
    centre_frac: tuple[float, float, float] = (0.0, 0.0, 0.0)
    summary: dict = field(default_factory=dict, compare=False)

    def __len__(self) -> int:
        return int(len(self.material_index))

    def sample_id(self, row: int) -> str:
        """The id of sample ``row`` (:func:`sample_id`)."""
        return sample_id(self.materials[int(self.material_index[row])], int(self.radius_angstrom[row]),
                         int(self.rotation_index[row]))

    def sample_ids(self) -> list[str]:
        """Every sample id, in table order."""
        return [sample_id(self.materials[m], r, k)
                for m, r, k in zip(self.material_index, self.radius_angstrom, self.rotation_index)]

    def split_names(self) -> np.ndarray:
        """(n,) split names as strings."""
        return np.asarray(SPLITS, dtype=object)[self.split]

    def mask(self, split: str | None = None, *, material: str | None = None,
             radius: int | None = None) -> np.ndarray:
        """Boolean row mask for a split / material / radius (None = any)."""
        m = np.ones(len(self), dtype=bool)
        if split is not None:
            if split not in SPLITS:
                raise C2NPInputError(f"unknown split {split!r}; choose one of {list(SPLITS)}")
            m &= self.split == SPLITS.index(split)
        if material is not None:
            if material not in self.materials:
                raise C2NPInputError(f"unknown material {material!r}")
            m &= self.material_index == self.materials.index(material)
        if radius is not None:
            m &= self.radius_angstrom == int(radius)
        return m

    def counts(self) -> dict[str, int]:
        """Samples per split."""
        return {s: int(np.sum(self.split == i)) for i, s in enumerate(SPLITS)}

    def to_records(self, rows: Iterable[int] | None = None) -> list[dict]:
        """Recipes as JSON-ready dicts."""
        idx = range(len(self)) if rows is None else rows
        names = self.split_names()
        return [{
            "sample_id": self.sample_id(i),
            "material": self.materials[self.material_index[i]],
            "radius_angstrom": int(self.radius_angstrom[i]),
            "rotation_index": int(self.rotation_index[i]),
            "quaternion_xyzw": [float(x) for x in self.quaternion[i]],
            "split": str(names[i]),
        } for i in idx]

    def canonical_bytes(self) -> bytes:
        """Bytes hashed in the dataset fingerprint (quaternions as float64)."""
        head = json.dumps({"protocol": self.protocol, "materials": list(self.materials),
                           "heldout": list(self.heldout_materials),
                           "centre_frac": list(self.centre_frac)}, sort_keys=True).encode()
        return b"".join([
            head,
            np.ascontiguousarray(self.material_index, dtype="<i4").tobytes(),
            np.ascontiguousarray(self.radius_angstrom, dtype="<i4").tobytes(),
            np.ascontiguousarray(self.rotation_index, dtype="<i4").tobytes(),
            np.ascontiguousarray(self.quaternion, dtype="<f8").tobytes(),
            np.ascontiguousarray(self.split, dtype="<i1").tobytes(),
        ])


def _group_key(group: np.ndarray) -> bytes:
    return np.round(group, 6).tobytes()


def build_recipes(cells: Sequence[UnitCell], protocol: Protocol | str = "paper", *,
                  radii_angstrom: Sequence[int] | None = None,
                  centre_frac: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> RecipeTable:
    """Build the recipe table of ``protocol`` for ``cells``.

    ``radii_angstrom`` restricts to a subset of the protocol's radii (e.g. for a demo); the
    orientation sets of the remaining radii are exactly those of the full protocol.
    """
    proto = get_protocol(protocol) if isinstance(protocol, str) else protocol
    radii = tuple(proto.radii_angstrom if radii_angstrom is None else radii_angstrom)
    unknown = [r for r in radii if r not in proto.radii_angstrom]
    if unknown:
        raise C2NPInputError(f"radii {unknown} are not in protocol {proto.name!r} "
                             f"({proto.radii_angstrom[0]}..{proto.radii_angstrom[-1]} Å)")
    if not cells:
        raise C2NPInputError("no unit cells given")
    centre = np.asarray(centre_frac, dtype=np.float64).reshape(-1)
    if centre.shape != (3,) or not np.all(np.isfinite(centre)):
        raise C2NPInputError(f"centre_frac must be 3 finite fractional coordinates, got {centre_frac!r}")
    centre_xyz = (float(centre[0]), float(centre[1]), float(centre[2]))
    materials = tuple(c.material_id for c in cells)
    if len(set(materials)) != len(materials):
        raise C2NPInputError("duplicate material ids in the cells")

    # One orientation family per rotation group (all materials share it in `paper`).
    groups: list[np.ndarray | None] = []
    if proto.modulo_symmetry:
        groups = [site_rotation_group(c, centre_frac) for c in cells]
    else:
        groups = [None] * len(cells)
    cache: dict[bytes | None, dict] = {}

    def family(group: np.ndarray | None) -> dict:
        key = None if group is None else _group_key(group)
        if key in cache:
            return cache[key]
        train = sample_orientations(n_rotations(proto.theta_train_deg), proto.theta_train_deg,
                                    proto.train_seed, max_trials=proto.max_trials_train, group=group)
        fam: dict = {"train": train.quaternions}
        for r in radii:
            split = proto.radius_split(r)
            if split in ("id", "ood"):
                theta = proto.theta_id_deg if split == "id" else proto.theta_ood_deg
                offset = proto.offset_id_euler_xyz_deg if split == "id" else proto.offset_ood_euler_xyz_deg
                margin = proto.margin_id_deg if split == "id" else proto.margin_ood_deg
                s = sample_orientations(n_rotations(theta), theta, proto.test_seed(r, theta),
                                        offset_euler_xyz_deg=offset, avoid=train.quaternions,
                                        avoid_margin_deg=margin, max_trials=proto.max_trials_test,
                                        group=group)
                fam[r] = s.quaternions
        cache[key] = fam
        return fam

    identity = np.array([[0.0, 0.0, 0.0, 1.0]])
    m_idx, r_col, k_col, q_col, s_col = [], [], [], [], []
    for mi in range(len(cells)):
        fam = family(groups[mi])
        for r in radii:
            split = proto.radius_split(r)
            quats = fam["train"] if split in ("train", "val") else fam[r]
            with_identity = split in ("train", "val") or proto.identity_outside_train
            if with_identity:
                quats = np.concatenate([identity, quats])
                ks = np.arange(len(quats))
            else:
                ks = np.arange(1, len(quats) + 1)
            n = len(quats)
            m_idx.append(np.full(n, mi))
            r_col.append(np.full(n, r))
            k_col.append(ks)
            q_col.append(quats)
            s_col.append(np.full(n, SPLITS.index(split)))
    split_arr = np.concatenate(s_col).astype(np.int8)
    mat_arr = np.concatenate(m_idx).astype(np.int32)
    if proto.val_fraction > 0:
        train_rows = np.flatnonzero(split_arr == SPLITS.index("train"))
        rng = np.random.default_rng(proto.val_seed)
        n_val = int(round(proto.val_fraction * len(train_rows)))
        split_arr[rng.choice(train_rows, size=n_val, replace=False)] = SPLITS.index("val")
    heldout: tuple[str, ...] = ()
    if proto.heldout_material_fraction > 0:
        heldout = heldout_materials_of(cells, proto)
    table = RecipeTable(
        protocol=proto.name, materials=materials, material_index=mat_arr,
        radius_angstrom=np.concatenate(r_col).astype(np.int32),
        rotation_index=np.concatenate(k_col).astype(np.int32),
        quaternion=np.concatenate(q_col).astype(np.float64),
        split=split_arr, heldout_materials=heldout,
        centre_frac=centre_xyz,
    )
    object.__setattr__(table, "summary", summarize(table, proto, groups))
    return table


def heldout_materials_of(cells: Sequence[UnitCell], proto: Protocol) -> tuple[str, ...]:
    """The held-out materials of ``proto`` among ``cells``.

    Without held-out structure types: a seeded ~``heldout_material_fraction`` per space group
    of ``cells`` (protocol ``strict``). With them (:attr:`Protocol.heldout_structure_types`,
    types from the shipped catalog): every material of those types; of the shipped ABH3
    perovskites, ``strict``'s draw over all 82 (so ``strict``'s held-out materials stay held
    out and a model trained under ``strict`` saw none of them); of the other shipped
    materials, the same seeded draw per space group over all of them. The draws are over the
    whole shipped catalog, so a material is held out or not whichever subset is built; cells
    that are not shipped materials are drawn among themselves.
    """
    if not proto.heldout_structure_types:
        return _stratified_holdout(cells, proto.heldout_material_fraction, proto.heldout_seed)
    from c2np.catalog.hydrides import material_ids
    from c2np.catalog.shipped import load_catalog, structure_types_of

    held_types = set(proto.heldout_structure_types)
    abh3_ids = set(material_ids())
    shipped = load_catalog("all")
    shipped_types = dict(zip((c.material_id for c in shipped), structure_types_of(c.material_id for c in shipped)))
    abh3 = [c for c in shipped if c.material_id in abh3_ids]
    others = [c for c in shipped if c.material_id not in abh3_ids and shipped_types[c.material_id] not in held_types]
    foreign = [c for c in cells if c.material_id not in shipped_types]
    held: set[str] = {m for m, t in shipped_types.items() if t in held_types}
    for group in (abh3, others, foreign):
        if group:
            held.update(_stratified_holdout(group, proto.heldout_material_fraction, proto.heldout_seed))
    return tuple(sorted(m for m in held if m in {c.material_id for c in cells}))


def _stratified_holdout(cells: Sequence[UnitCell], fraction: float, seed: int) -> tuple[str, ...]:
    """About ``fraction`` of materials, drawn per space group (seeded)."""
    by_sg: dict[int, list[str]] = {}
    for c in cells:
        by_sg.setdefault(standardize(c).spacegroup, []).append(c.material_id)
    rng = np.random.default_rng(seed)
    out: list[str] = []
    for sg in sorted(by_sg):
        ids = sorted(by_sg[sg])
        k = int(np.floor(fraction * len(ids) + rng.random()))  # unbiased rounding
        out.extend(rng.choice(ids, size=min(k, len(ids)), replace=False).tolist())
    return tuple(sorted(out))


def summarize(table: RecipeTable, proto: Protocol, groups: list[np.ndarray | None]) -> dict:
    """Sizes per split and minimum separations (degrees) of the orientation sets: the
    smallest value over every distinct orientation family (one per rotation group)."""
    out: dict = {"protocol": proto.name, "n_samples": len(table), "n_materials": len(table.materials),
                 "per_split": table.counts(), "per_material": {}, "min_separation_deg": {}}
    if len(table) == 0:
        return out
    seen: set = set()
    seps: dict[str, float] = {}
    for mi, group in enumerate(groups):
        key = None if group is None else _group_key(group)
        if key in seen:
            continue
        seen.add(key)
        m0 = table.material_index == mi
        train_q = np.unique(table.quaternion[m0 & np.isin(table.split, [0, 1]) & (table.rotation_index > 0)],
                            axis=0)
        found = {"train_within": min_separation_deg(train_q, group=group)}
        for r in sorted(set(table.radius_angstrom[m0].tolist())):
            s = proto.radius_split(r)
            if s in ("id", "ood"):
                q = table.quaternion[m0 & (table.radius_angstrom == r) & (table.rotation_index > 0)]
                found[f"R{r}_{s}_within"] = min_separation_deg(q, group=group)
                found[f"R{r}_{s}_to_train"] = min_separation_deg(q, train_q, group=group)
        for k, v in found.items():
            seps[k] = min(v, seps.get(k, float("inf")))
    out["min_separation_deg"] = seps
    out["n_orientation_families"] = len(seen)
    out["per_material"] = {s: int(np.sum((table.material_index == 0) & (table.split == i)))
                           for i, s in enumerate(SPLITS)}
    out["modulo_symmetry"] = proto.modulo_symmetry
    out["heldout_materials"] = list(table.heldout_materials)
    return out
