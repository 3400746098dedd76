"""Data of the 3D particle viewer: a predicted and a reference particle, each atom with its
element, its error class and whether it lies in the surface shell.

Error classes come from the matching the task-1 metrics count
(:func:`c2np.metrics.tolerance_matching`, a maximum one-to-one matching of same-element
atoms closer than the tolerance): class 0 = matched within 0.1 Å, 1 = matched within
0.5 Å (and not within 0.1 Å), 2 = unmatched (a reference atom nobody predicted) or extra (a
predicted atom matching no reference atom within 0.5 Å). The page (``viewer.js``) draws
them with plotly ``scatter3d`` (WebGL).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError
from c2np.metrics import tolerance_matching

__all__ = ["ViewerSample", "atom_classes", "surface_mask", "element_colour", "viewer_payload",
           "CLASS_LABELS_REF", "CLASS_LABELS_PRED", "CLASS_COLOURS", "VIEWER_MAX_ATOMS",
           "SURFACE_DEPTH_ANGSTROM"]

FINE_TOLERANCE_ANGSTROM = 0.1
COARSE_TOLERANCE_ANGSTROM = 0.5
CLASS_LABELS_REF = ("matched within 0.1 Å", "matched within 0.5 Å", "unmatched (missed)")
CLASS_LABELS_PRED = ("matched within 0.1 Å", "matched within 0.5 Å", "extra (no partner)")
CLASS_COLOURS = ("#2ca02c", "#ff9f1c", "#d62728")
VIEWER_MAX_ATOMS = 50_000  # per particle; a larger particle is not put into a page
SURFACE_DEPTH_ANGSTROM = 3.0


@dataclass(frozen=True, eq=False)
class ViewerSample:
    """One sample to view.

    Attributes:
        sample_id, model, split: identification.
        radius_angstrom: the sphere radius R of the sample.
        pred_numbers, pred_positions_angstrom: prediction, (n_P,) and (n_P, 3) Å, centred.
        ref_numbers, ref_positions_angstrom: reference, (n_G,) and (n_G, 3) Å, centred.
        scores: the sample's metric values from its results document.
    """

    sample_id: str
    model: str
    split: str
    radius_angstrom: float
    pred_numbers: np.ndarray
    pred_positions_angstrom: np.ndarray
    ref_numbers: np.ndarray
    ref_positions_angstrom: np.ndarray
    scores: Mapping[str, float] = field(default_factory=dict)


def atom_classes(pred_numbers: np.ndarray, pred_positions_angstrom: np.ndarray,
                 ref_numbers: np.ndarray, ref_positions_angstrom: np.ndarray, *,
                 fine_angstrom: float = FINE_TOLERANCE_ANGSTROM,
                 coarse_angstrom: float = COARSE_TOLERANCE_ANGSTROM
                 ) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Error class of every atom: ``(pred (n_P,) uint8, ref (n_G,) uint8, matched counts)``.

    An atom is class 0 when the fine matching pairs it, else 1 when the coarse matching
    does, else 2. The counts ``{"0.1": M, "0.5": M}`` are the two matchings' sizes, the M
    of atom precision / recall / F1. (Each matching is a maximum matching of its own; an
    atom paired only by the fine one is shown as class 0.)
    """
    fine = tolerance_matching(pred_numbers, pred_positions_angstrom, ref_numbers,
                              ref_positions_angstrom, tolerance_angstrom=fine_angstrom)
    coarse = tolerance_matching(pred_numbers, pred_positions_angstrom, ref_numbers,
                                ref_positions_angstrom, tolerance_angstrom=coarse_angstrom)
    pred = np.full(len(fine), 2, dtype=np.uint8)
    ref = np.full(len(np.asarray(ref_numbers)), 2, dtype=np.uint8)
    pred[coarse >= 0] = 1
    ref[coarse[coarse >= 0]] = 1
    pred[fine >= 0] = 0
    ref[fine[fine >= 0]] = 0
    return pred, ref, {f"{fine_angstrom:g}": int(np.sum(fine >= 0)),
                       f"{coarse_angstrom:g}": int(np.sum(coarse >= 0))}


def surface_mask(positions_angstrom: np.ndarray, *, radius_angstrom: float,
                 depth_angstrom: float = SURFACE_DEPTH_ANGSTROM) -> np.ndarray:
    """(n,) bool: atoms in the outer shell, farther than ``R − depth`` from the sphere centre
    (the origin of the centred frame)."""
    x = np.asarray(positions_angstrom, dtype=np.float64).reshape(-1, 3)
    return np.linalg.norm(x, axis=1) > float(radius_angstrom) - float(depth_angstrom)


def element_colour(z: int) -> str:
    """Display colour of an element: Jmol's, with hydrogen grey (white is invisible on the
    page background)."""
    from ase.data.colors import jmol_colors

    if int(z) == 1:
        return "#7a7a7a"
    r, g, b = (int(round(255 * c)) for c in jmol_colors[int(z)])
    return f"#{r:02x}{g:02x}{b:02x}"


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")


def viewer_payload(sample: ViewerSample, *, max_atoms: int = VIEWER_MAX_ATOMS,
                   depth_angstrom: float = SURFACE_DEPTH_ANGSTROM) -> dict[str, Any]:
    """The JSON document ``viewer.js`` draws: element table, and per side (``ref``,
    ``pred``) base64 arrays: positions float32 little-endian (n, 3) Å, element index uint8,
    error class uint8, surface flag uint8. A particle over ``max_atoms`` raises
    :class:`C2NPInputError` (the site then shows a note instead)."""
    from ase.data import chemical_symbols, covalent_radii

    zp = np.asarray(sample.pred_numbers, dtype=np.int64)
    zg = np.asarray(sample.ref_numbers, dtype=np.int64)
    xp = np.asarray(sample.pred_positions_angstrom, dtype=np.float64).reshape(len(zp), 3)
    xg = np.asarray(sample.ref_positions_angstrom, dtype=np.float64).reshape(len(zg), 3)
    for which, n in (("prediction", len(zp)), ("reference", len(zg))):
        if n > max_atoms:
            raise C2NPInputError(f"{sample.model} {sample.sample_id}: the {which} has {n} atoms, "
                                 f"more than the viewer's limit of {max_atoms}")
    if not (np.all(np.isfinite(xp)) and np.all(np.isfinite(xg))):
        raise C2NPInputError(f"{sample.model} {sample.sample_id}: non-finite positions")
    cls_p, cls_g, matched = atom_classes(zp, xp, zg, xg)
    elements = sorted(set(zp.tolist()) | set(zg.tolist()))
    index = {z: i for i, z in enumerate(elements)}
    lut = np.zeros(max(elements, default=0) + 1, dtype=np.uint8)
    for z, i in index.items():
        lut[z] = i

    def side(z: np.ndarray, x: np.ndarray, cls: np.ndarray) -> dict[str, Any]:
        surf = surface_mask(x, radius_angstrom=sample.radius_angstrom, depth_angstrom=depth_angstrom)
        return {"n": int(len(z)), "pos": _b64(x.astype("<f4")), "el": _b64(lut[z]),
                "cls": _b64(cls.astype(np.uint8)), "surf": _b64(surf.astype(np.uint8))}

    return {
        "sample_id": sample.sample_id, "model": sample.model, "split": sample.split,
        "radius_angstrom": float(sample.radius_angstrom), "surface_depth_angstrom": float(depth_angstrom),
        "elements": [{"z": int(z), "symbol": chemical_symbols[int(z)], "colour": element_colour(z),
                      "size": float(np.clip(2.0 + 2.0 * covalent_radii[int(z)], 2.5, 7.0))}
                     for z in elements],
        "classes": {"ref": list(CLASS_LABELS_REF), "pred": list(CLASS_LABELS_PRED),
                    "colours": list(CLASS_COLOURS)},
        "matched": matched,
        "scores": {k: float(v) for k, v in sample.scores.items()},
        "ref": side(zg, xg, cls_g),
        "pred": side(zp, xp, cls_p),
    }
