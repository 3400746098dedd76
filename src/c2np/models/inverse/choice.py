"""The candidates of a particle and the choice of its answer among them (torch-free):
:class:`Candidate` (one read-out generated cell), :func:`choose_candidate` (a vote, or the
smallest pair-profile mismatch with a symmetric margin) and :func:`vote`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from c2np.errors import C2NPInputError
from c2np.models.inverse.config import RANK_RULES
from c2np.predictions import InversePrediction

__all__ = ["Candidate", "choose_candidate", "vote"]


@dataclass(frozen=True)
class Candidate:
    """One read-out generated cell of a particle: its composition (atoms per slot), the
    answer read from it (params (6,) Å/deg, space group), its shortest interatomic distance
    (Å), its pair-profile mismatch with the particle (nan when not computed), the count
    head's log-probability of its composition, its cell volume (Å^3), the space group of
    the template it was sampled under (0: none), the generated cell itself (lattice (3, 3)
    rows Å, frac (n, 3), slots (n,)), kept for diagnostics and re-reading, the number of
    symmetry operations of its template's primitive cell (0: none), in a
    :class:`~c2np.models.inverse.pool.GeneratorPool` the name of the member that made it,
    and the radius (Å) of the central crop the network was conditioned on (0: the whole
    particle; ``GenConfig.crop_radii_angstrom``)."""

    composition: tuple[int, ...]
    params: np.ndarray
    spacegroup: int
    min_pair_angstrom: float
    mismatch: float
    composition_logprob: float
    volume_angstrom3: float
    template_spacegroup: int = 0
    cell: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    n_operations: int = 0
    generator: str = ""
    view_radius_angstrom: float = 0.0


def choose_candidate(cands: Sequence[Candidate], *, rule: str = "vote", min_pair_angstrom: float = 0.0,
                     symmetric_margin: float = 0.0, symmetric_margin_rel: float = 0.0,
                     symmetric_margin_per_angstrom: float = 0.0, noise_angstrom: float = 0.0
                     ) -> InversePrediction | None:
    """The answer of a particle from its candidates. Only the structurally valid ones
    (shortest distance >= ``min_pair_angstrom``) count; none valid -> all of them.
    ``vote``: :func:`vote` over their answers. ``profile`` (and ``stretch``, ``refine``, whose
    candidates carry the stretched / refined mismatch): the answer of the candidate with the
    smallest pair-profile mismatch (ties: the earlier); with a margin ``symmetric_margin +
    symmetric_margin_rel x best + symmetric_margin_per_angstrom x noise_angstrom`` > 0
    (``best``: the smallest mismatch; ``noise_angstrom``: the particle's estimated noise), of
    the candidates within it of the smallest, the one whose template has the most symmetry
    operations (ties: the smaller mismatch) — of two cells that explain the particle equally
    well, the more symmetric. The noise part widens the margin where noise lets the less
    symmetric cells fit better (docs/inverse_results.md). None for no candidates."""
    if rule not in RANK_RULES:
        raise C2NPInputError(f"rank must be one of {list(RANK_RULES)}, got {rule!r}")
    valid = [c for c in cands if c.min_pair_angstrom >= min_pair_angstrom] or list(cands)
    if not valid:
        return None
    if rule == "vote":
        return vote([(c.params, c.spacegroup) for c in valid])
    mis = np.array([c.mismatch for c in valid], dtype=np.float64)
    if np.all(np.isnan(mis)):
        raise C2NPInputError("rank 'profile': no candidate has a pair-profile mismatch")
    best = valid[int(np.nanargmin(mis))]
    margin = (symmetric_margin + symmetric_margin_rel * best.mismatch
              + symmetric_margin_per_angstrom * max(float(noise_angstrom), 0.0))
    if margin > 0:
        near = [c for c in valid if c.mismatch <= best.mismatch + margin]
        best = max(near, key=lambda c: (c.n_operations, -c.mismatch))
    return InversePrediction.from_values([float(x) for x in best.params], int(best.spacegroup))


def vote(answers: Sequence[tuple[np.ndarray, int]], *, length_tol_angstrom: float = 0.25,
         angle_tol_deg: float = 0.5) -> InversePrediction | None:
    """The most frequent (space group, lattice) answer among read-out samples ``(params (6,)
    Å/deg, space group)``: the answer with the most answers of the same group within
    ``length_tol_angstrom`` / ``angle_tol_deg`` of it (ties: the earlier), reported as the
    median parameters of those answers. None for no answers."""
    if not answers:
        return None
    params = np.array([np.asarray(p, dtype=np.float64) for p, _ in answers])
    groups = np.array([int(s) for _, s in answers])
    close = ((groups[:, None] == groups[None, :])
             & (np.abs(params[:, None, :3] - params[None, :, :3]).max(-1) <= length_tol_angstrom)
             & (np.abs(params[:, None, 3:] - params[None, :, 3:]).max(-1) <= angle_tol_deg))
    best = int(np.argmax(close.sum(1)))
    return InversePrediction.from_values(np.median(params[close[best]], axis=0), int(groups[best]))

