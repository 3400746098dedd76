"""The analytic priors of a model, read from its configuration (torch-free).

:func:`forward_priors` names what a task-1 generator's config writes into it (lattice sites,
the sphere boundary, snapping, the carver); :func:`inverse_priors` what a task-2 crystal
generator's config does (space-group templates, profile ranking and refinement, central
crops) and :func:`pool_priors` those of a pool of them. The
category follows: no prior is ``learned``, any prior is ``learned+prior``
(:mod:`c2np.categories`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from c2np.categories import LEARNED, LEARNED_PRIOR, PRIORS, ModelCategory, check_category

__all__ = ["forward_priors", "inverse_priors", "pool_priors", "category_of_priors"]


def forward_priors(model: str, config: Mapping[str, Any]) -> tuple[str, ...]:
    """Priors of a task-1 model ``model`` (family name) with ``config`` (a ``ModelConfig``
    dict), from what its code does with that config:

    * ``sitescore``: ``carve`` (its candidates are the carved sites);
    * a diffusion / flow family with ``site_features``: ``lattice-sites`` (the sites of the
      cell as features, and with ``exclusion_iters`` > 0 as the choices of the site-assignment
      head) and ``sphere-boundary`` (each site's position relative to R is an input, and the
      head's scores carry a fixed penalty per Å outside R);
    * CDVAE with ``confine_margin >= 0``: ``sphere-boundary`` (positions reflected into the ball);
    * MatterGen with ``sample_site_tol_angstrom > 0``: ``site-snapping`` (only atoms near a
      site are kept, one per site, re-typed by the site);
    * ADiT with ``site_features`` and ``exclusion_iters`` > 0: ``lattice-sites``,
      ``sphere-boundary`` and ``site-snapping`` (its decoder moves every decoded position to
      its site choice, scored with the sphere penalty); without the head its decoder uses no
      lattice site.
    """
    if model == "sitescore":
        return ("carve",)
    out: list[str] = []
    site_head = bool(config.get("site_features")) and int(config.get("exclusion_iters", 0)) > 0
    if model == "adit":
        return ("lattice-sites", "sphere-boundary", "site-snapping") if site_head else ()
    if config.get("site_features"):
        out += ["lattice-sites", "sphere-boundary"]
    if model == "cdvae" and float(config.get("confine_margin", -1.0)) >= 0.0 and "sphere-boundary" not in out:
        out.append("sphere-boundary")
    if model == "mattergen" and float(config.get("sample_site_tol_angstrom", 0.0)) > 0.0:
        out.append("site-snapping")
    return tuple(out)


def inverse_priors(config: Mapping[str, Any]) -> tuple[str, ...]:
    """Priors of a task-2 crystal generator with ``config`` (a ``GenConfig`` dict), from what
    its code does with that config (:mod:`c2np.models.inverse.generator`):

    * ``z_candidates="templates"``: ``spacegroup-templates`` (cells sampled under, and projected
      onto, the Wyckoff templates of training cells; the template's group is read out and, with
      a symmetric margin, the template with more operations preferred). ``read_rule="template"``
      alone is no prior: without a template it is the tightest spglib read-out;
    * ``rank`` ``profile``, ``stretch`` or ``refine``: ``profile-ranking`` (the answer is the
      candidate whose pair-distance profile best matches the particle's);
    * ``rank`` ``stretch`` or ``refine``: also ``profile-refinement`` (every candidate lattice is
      stretched isotropically to the particle's pair distances; ``refine`` also refines the best
      template-sampled cells' lattice and coordinates against the profile);
    * ``crop_radii_angstrom``: ``central-crop``.

    The rest is learned or generic: the particle descriptor (a featurisation of the query), the
    count head, the network's process, spglib's read-out of the generated cell and the minimum
    interatomic distance a valid cell must have."""
    out: list[str] = []
    if config.get("z_candidates") == "templates":
        out.append("spacegroup-templates")
    if config.get("rank") in ("profile", "stretch", "refine"):
        out.append("profile-ranking")
    if config.get("rank") in ("stretch", "refine"):
        out.append("profile-refinement")
    if config.get("crop_radii_angstrom"):
        out.append("central-crop")
    return tuple(out)


def pool_priors(member_configs: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """Priors of a pool of task-2 crystal generators (:mod:`c2np.models.inverse.pool`) whose
    members have ``member_configs`` (``GenConfig`` dicts): every member's
    (:func:`inverse_priors`), ``profile-ranking`` (the pool chooses among all members'
    candidates by their pair-profile mismatch) and ``ensemble``, in :data:`~c2np.categories.PRIORS`
    order."""
    found = {p for cfg in member_configs for p in inverse_priors(cfg)} | {"profile-ranking", "ensemble"}
    return tuple(p for p in PRIORS if p in found)


def category_of_priors(priors: tuple[str, ...] | list[str]) -> ModelCategory:
    """``learned`` without priors, else ``learned+prior`` with them (validated)."""
    return check_category(LEARNED_PRIOR if priors else LEARNED, list(priors))
