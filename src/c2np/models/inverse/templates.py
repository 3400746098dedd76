"""Space-group templates for the task-2 crystal generator (DiffCSP++-style, by projection).

A :class:`CellTemplate` is a training material's standardized primitive cell in the basis the
generator is trained on (:func:`c2np.models.inverse.examples.cell_example`): the species slot of each
atom, the symmetry operations ``(W, w)`` of that cell in its fractional basis (spglib; column
convention ``x' = W x + w``) and, per operation, the atom permutation ``perm[g, i] = j`` with
``W x_i + w = x_j`` (mod 1). Sampling under a template projects the cell onto the template's
symmetric subspace after every reverse step (:func:`project_lattice`, :func:`project_frac`),
so the generated cell has the template's space group by construction; the atoms' coordinates
and the lattice within that subspace are the network's.

Templates come from training cells only (:func:`c2np.models.inverse.examples.build_templates` on a
ForwardTask's training examples; under protocol ``strict`` never a held-out material, checked) and are
stored as JSON beside the generator's weights (:data:`TEMPLATES_FILE`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError

__all__ = ["CellTemplate", "TemplateBlocks", "template_of", "merge_templates", "project_lattice",
           "project_frac", "project_frac_template", "metric_average", "orbits", "save_templates", "load_templates",
           "TEMPLATES_FILE"]

TEMPLATES_FILE = "templates.json"


@dataclass(frozen=True, eq=False)
class CellTemplate:
    """A space-group template: ``spacegroup``; ``slots`` (n,) species slot per atom (sorted);
    ``rotations`` (m, 3, 3) int and ``translations`` (m, 3) the operations in the cell's
    fractional basis; ``perm`` (m, n) the atom each operation maps atom i onto; ``wyckoffs``
    the Wyckoff letter per atom; ``materials`` the training materials with this template;
    ``lattice_angstrom`` (3, 3) rows and ``frac`` (n, 3) the first such material's cell."""

    spacegroup: int
    slots: np.ndarray
    rotations: np.ndarray
    translations: np.ndarray
    perm: np.ndarray
    wyckoffs: tuple[str, ...]
    materials: tuple[str, ...]
    lattice_angstrom: np.ndarray
    frac: np.ndarray

    @property
    def composition(self) -> tuple[int, ...]:
        """Atoms per species slot (the generator's composition key)."""
        from c2np.particle_descriptor import N_SLOTS

        return tuple(int(np.sum(self.slots == k)) for k in range(N_SLOTS))

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two templates the same: group, composition, Wyckoff letters per slot."""
        return (self.spacegroup, self.composition,
                tuple(sorted(zip(self.slots.tolist(), self.wyckoffs))))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {"spacegroup": self.spacegroup, "slots": self.slots.tolist(),
                "rotations": self.rotations.tolist(), "translations": self.translations.tolist(),
                "perm": self.perm.tolist(), "wyckoffs": list(self.wyckoffs),
                "materials": list(self.materials), "lattice_angstrom": self.lattice_angstrom.tolist(),
                "frac": self.frac.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellTemplate:
        """Inverse of :meth:`to_dict`."""
        return cls(int(d["spacegroup"]), np.asarray(d["slots"], dtype=np.int64),
                   np.asarray(d["rotations"], dtype=np.int64), np.asarray(d["translations"], dtype=np.float64),
                   np.asarray(d["perm"], dtype=np.int64), tuple(str(w) for w in d["wyckoffs"]),
                   tuple(str(m) for m in d["materials"]), np.asarray(d["lattice_angstrom"], dtype=np.float64),
                   np.asarray(d["frac"], dtype=np.float64))


def _wrap(d: np.ndarray) -> np.ndarray:
    """Fractional differences wrapped to [-0.5, 0.5)."""
    return d - np.floor(d + 0.5)


def _permutations(frac: np.ndarray, slots: np.ndarray, rotations: np.ndarray, translations: np.ndarray,
                  *, tol_frac: float) -> np.ndarray:
    """(m, n) ``perm[g, i]``: the atom of the same slot at ``W_g x_i + w_g`` (mod 1)."""
    img = np.einsum("gab,nb->gna", rotations, frac) + translations[:, None, :]       # (m, n, 3)
    d = np.abs(_wrap(img[:, :, None, :] - frac[None, None, :, :])).max(-1)           # (m, n, n)
    d = np.where(slots[None, None, :] == slots[None, :, None], d, np.inf)
    perm = d.argmin(-1)
    if not np.all(np.take_along_axis(d, perm[..., None], -1) < tol_frac):
        raise C2NPInputError("template: an operation maps an atom onto no atom of its species")
    if any(len(set(p.tolist())) != len(p) for p in perm):
        raise C2NPInputError("template: an operation is not a permutation of the atoms")
    return perm


def template_of(lattice_angstrom: np.ndarray, frac: np.ndarray, slots: np.ndarray, material_id: str, *,
                symprec_angstrom: float = 1e-3, tol_frac: float = 1e-3) -> CellTemplate:
    """The template of a (standardized primitive) training cell: lattice (3, 3) rows Å, frac
    (n, 3), slots (n,); operations by spglib at ``symprec_angstrom``."""
    import spglib

    lat, f, s = (np.asarray(lattice_angstrom, dtype=np.float64), np.asarray(frac, dtype=np.float64) % 1.0,
                 np.asarray(slots, dtype=np.int64))
    ds = spglib.get_symmetry_dataset((lat, f, s + 1), symprec=symprec_angstrom)  # type: ignore[arg-type]
    if ds is None:
        raise C2NPInputError(f"{material_id}: spglib found no symmetry for the template")
    rot, tr = np.asarray(ds.rotations, dtype=np.int64), np.asarray(ds.translations, dtype=np.float64)
    perm = _permutations(f, s, rot, tr, tol_frac=tol_frac)
    return CellTemplate(int(ds.number), s, rot, tr, perm, tuple(str(w) for w in ds.wyckoffs), (material_id,),
                        lat, f)


def merge_templates(templates: Iterable[CellTemplate]) -> list[CellTemplate]:
    """Deduplicate by :attr:`CellTemplate.key` (the first kept, the materials joined)."""
    out: dict[tuple[Any, ...], CellTemplate] = {}
    for t in templates:
        if t.key in out:
            out[t.key] = replace(out[t.key], materials=out[t.key].materials + t.materials)
        else:
            out[t.key] = t
    return sorted(out.values(), key=lambda t: (t.spacegroup, len(t.slots), t.key))


def metric_average(metric: np.ndarray, rotations: np.ndarray) -> np.ndarray:
    """Metrics (..., 3, 3) averaged over the point group ``rotations`` (m, 3, 3) of a
    fractional basis: ``mean_g W_g^T G W_g`` (the metric's projection onto the invariant ones)."""
    W = np.asarray(rotations, dtype=np.float64)
    return np.einsum("gba,...bc,gcd->...ad", W, np.asarray(metric, dtype=np.float64), W) / len(W)


def orbits(perm: np.ndarray) -> list[tuple[int, np.ndarray, list[tuple[int, int]]]]:
    """The orbits of the atom permutation ``perm`` (m, n) of m operations (``perm[g, i]``: the
    atom that operation g takes atom i to): per orbit (its first atom r, the mask (m,) of r's
    site operations (``g(r) = r``), [(member j, the first operation g with ``g(r) = j``)])."""
    out = []
    for r in range(perm.shape[1]):
        members = perm[:, r]
        if members.min() < r:               # r is not the first atom of its orbit
            continue
        out.append((r, members == r, [(int(j), int(np.flatnonzero(members == j)[0])) for j in np.unique(members)]))
    return out


def project_lattice(lattice: np.ndarray, rotations: np.ndarray, *, min_eig: float = 1e-8) -> np.ndarray:
    """Lattices (..., 3, 3) (rows a, b, c; any length unit) projected onto the metric symmetry
    of ``rotations`` (m, 3, 3): ``G = L L^T -> G_sym = mean_g W_g^T G W_g``, then
    ``L' = G_sym^(1/2) G^(-1/2) L`` (``L' L'^T = G_sym``, orientation kept; identity when ``G``
    is already symmetric). Lattices with a metric eigenvalue below ``min_eig`` are returned as
    they are."""
    L = np.asarray(lattice, dtype=np.float64)
    G = L @ np.swapaxes(L, -1, -2)
    G_sym = metric_average(G, rotations)
    ev, V = np.linalg.eigh(G)
    evs, Vs = np.linalg.eigh(G_sym)
    ok = (ev.min(-1) > min_eig) & (evs.min(-1) > min_eig)
    inv_sqrt = (V * (1.0 / np.sqrt(np.clip(ev, min_eig, None)))[..., None, :]) @ np.swapaxes(V, -1, -2)
    sqrt_sym = (Vs * np.sqrt(np.clip(evs, min_eig, None))[..., None, :]) @ np.swapaxes(Vs, -1, -2)
    out = sqrt_sym @ inv_sqrt @ L
    return np.where(ok[..., None, None], out, L)


def _orbit_average(x: np.ndarray, rotations: np.ndarray, translations: np.ndarray, perm: np.ndarray
                   ) -> np.ndarray:
    """``x_i + mean_g wrap(g^-1(x_{perm[g, i]}) - x_i)`` for frac (..., n, 3) (not wrapped)."""
    W_inv = np.linalg.inv(np.asarray(rotations, dtype=np.float64))                  # (m, 3, 3)
    back = np.einsum("gab,...gnb->...gna", W_inv, x[..., perm, :] - translations[:, None, :])
    return x + _wrap(back - x[..., None, :, :]).mean(-3)


def _site_project(p: np.ndarray, rotations: np.ndarray, translations: np.ndarray, ref: np.ndarray
                  ) -> np.ndarray:
    """Positions (..., 3) moved least onto the template's Wyckoff set of one orbit: the fixed
    points ``(W - I) p + w = n`` of the site operations (k, 3, 3), (k, 3), with the integers
    ``n`` of the template's own position ``ref`` (3,) carried to ``p``'s cell
    (``n = n_ref + (W - I) round(p - ref)``), so an atom cannot jump to another Wyckoff
    position of the same site symmetry (e.g. 1a <-> 1b of Pm-3m)."""
    A3 = rotations - np.eye(3)                                                       # (k, 3, 3)
    n_ref = np.round(A3 @ ref + translations)                                        # (k, 3)
    n = n_ref + np.einsum("kab,...b->...ka", A3, np.round(p - ref))
    r = np.einsum("kab,...b->...ka", A3, p) + translations - n
    return p - r.reshape(*p.shape[:-1], -1) @ np.linalg.pinv(A3.reshape(-1, 3)).T


def project_frac(frac: np.ndarray, rotations: np.ndarray, translations: np.ndarray, perm: np.ndarray,
                 reference: np.ndarray) -> np.ndarray:
    """Fractional coordinates (..., n, 3) projected onto the cells with the operations
    (rotations (m, 3, 3), translations (m, 3), perm (m, n)): the orbit average ``x_i + mean_g
    wrap(g^-1(x_{perm[g, i]}) - x_i)``, then per orbit its first atom moved least onto the
    Wyckoff set of the same atom of ``reference`` (n, 3) (the template's cell) and the orbit
    rebuilt from it (``x_j = W_g x_r + w_g``), wrapped to [0, 1).
    The result is exactly symmetric; the map is a projection (the linear orbit average) for
    cells within a small fraction of a cell of symmetric. It also fixes the origin to the
    template's."""
    x = np.asarray(frac, dtype=np.float64)
    rot = np.asarray(rotations, dtype=np.float64)
    tr = np.asarray(translations, dtype=np.float64)
    y = _orbit_average(x, rot, tr, perm)
    out = np.empty_like(y)
    for r, stab, members in orbits(perm):
        p = _site_project(y[..., r, :], rot[stab], tr[stab], np.asarray(reference, dtype=np.float64)[r])
        for j, g in members:
            out[..., j, :] = p @ rot[g].T + tr[g]
    return out % 1.0


@dataclass(frozen=True)
class _FracPlan:
    """What :func:`project_frac` computes from a template alone (operations as float64, their
    inverses, per orbit the Wyckoff-set projector), so that projecting the cells of every
    sampling step under one template does not recompute it."""

    rot: np.ndarray                 # (m, 3, 3) float64
    tr: np.ndarray                  # (m, 3)
    w_inv: np.ndarray               # (m, 3, 3) inverses of rot
    perm: np.ndarray                # (m, n)
    # per orbit: (first atom r, A3 = W - I of its site operations (k,3,3), their translations
    # (k,3), n_ref (k,3), pinv(A3 stacked).T (3k,3), [(member j, rot[g].T, tr[g])])
    orbits: tuple[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                        tuple[tuple[int, np.ndarray, np.ndarray], ...]], ...]


@functools.lru_cache(maxsize=256)
def _frac_plan(template: CellTemplate) -> _FracPlan:
    """The :class:`_FracPlan` of a template (cached per template object)."""
    rot = np.asarray(template.rotations, dtype=np.float64)
    tr = np.asarray(template.translations, dtype=np.float64)
    ref = np.asarray(template.frac, dtype=np.float64)
    plan = []
    for r, stab, members in orbits(template.perm):
        A3 = rot[stab] - np.eye(3)
        n_ref = np.round(A3 @ ref[r] + tr[stab])
        plan.append((r, A3, tr[stab], n_ref, np.linalg.pinv(A3.reshape(-1, 3)).T,
                     tuple((j, rot[g].T, tr[g]) for j, g in members)))
    return _FracPlan(rot, tr, np.linalg.inv(rot), np.asarray(template.perm), tuple(plan))


def project_frac_template(frac: np.ndarray, template: CellTemplate) -> np.ndarray:
    """:func:`project_frac` of frac (..., n, 3) onto ``template`` (its operations and its own
    cell as the reference), with the template's part computed once per template: the same
    arithmetic, the same result."""
    plan = _frac_plan(template)
    x = np.asarray(frac, dtype=np.float64)
    back = np.einsum("gab,...gnb->...gna", plan.w_inv, x[..., plan.perm, :] - plan.tr[:, None, :])
    y = x + _wrap(back - x[..., None, :, :]).mean(-3)
    out = np.empty_like(y)
    for r, A3, tr, n_ref, pinv_t, members in plan.orbits:
        p = y[..., r, :]
        n = n_ref + np.einsum("kab,...b->...ka", A3, np.round(p - template.frac[r]))
        res = np.einsum("kab,...b->...ka", A3, p) + tr - n
        p = p - res.reshape(*p.shape[:-1], -1) @ pinv_t
        for j, rot_t, t in members:
            out[..., j, :] = p @ rot_t + t
    return out % 1.0


@dataclass(frozen=True, eq=False)
class TemplateBlocks:
    """The rows of one sampling batch, in consecutive blocks each sampled under its own
    template (all of one composition, so of one atom count and slot order): rows
    ``bounds[k]:bounds[k + 1]`` under ``templates[k]``."""

    templates: tuple[CellTemplate, ...]
    bounds: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.bounds) != len(self.templates) + 1 or any(b < a for a, b in zip(self.bounds, self.bounds[1:])):
            raise C2NPInputError("template blocks: bounds must be one more than the templates, increasing")
        if len({t.composition for t in self.templates}) > 1:
            raise C2NPInputError("template blocks: every template must have the same composition")

    @classmethod
    def single(cls, template: CellTemplate, n_rows: int) -> TemplateBlocks:
        """Every one of ``n_rows`` rows under ``template``."""
        return cls((template,), (0, int(n_rows)))

    @property
    def composition(self) -> tuple[int, ...]:
        """The templates' common composition."""
        return self.templates[0].composition

    @property
    def n_rows(self) -> int:
        """Rows covered by the blocks."""
        return self.bounds[-1]

    def blocks(self) -> list[tuple[CellTemplate, int, int]]:
        """(template, first row, end row) per non-empty block."""
        return [(t, a, b) for t, a, b in zip(self.templates, self.bounds, self.bounds[1:]) if b > a]


def save_templates(templates: Sequence[CellTemplate], folder: str | Path) -> Path:
    """Write :data:`TEMPLATES_FILE` (JSON) into a generator folder."""
    from c2np.fileio import write_text

    path = Path(folder) / TEMPLATES_FILE
    write_text(path, json.dumps([t.to_dict() for t in templates]) + "\n")
    return path


def load_templates(folder: str | Path) -> list[CellTemplate] | None:
    """The templates of a generator folder; None when it has no :data:`TEMPLATES_FILE`."""
    import os

    from c2np.models.runfiles import member
    from c2np.models.schemas import TEMPLATES_SCHEMA
    from c2np.structured import read_json
    from c2np.terminal import clipped, printable

    path = Path(folder) / TEMPLATES_FILE
    if not os.path.lexists(path):
        return None
    doc = read_json(member(folder, path, what="templates file"), what="templates file", schema=TEMPLATES_SCHEMA)
    try:
        return [CellTemplate.from_dict(d) for d in doc]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise C2NPInputError(f"{printable(path)}: not a templates file ({clipped(str(exc), 200)})") from None
