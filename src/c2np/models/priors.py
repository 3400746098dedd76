"""The analytic priors of a model, read from its configuration (torch-free).

:func:`forward_priors` names what a task-1 generator's config writes into it (lattice sites,
the sphere boundary, snapping, the carver); :func:`inverse_priors` what a task-2 crystal
generator's config does (space-group templates, profile refinement, central crops). The
category follows: no prior is ``learned``, any prior is ``learned+prior``
(:mod:`c2np.categories`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from c2np.categories import LEARNED, LEARNED_PRIOR, ModelCategory, check_category

__all__ = ["forward_priors", "inverse_priors", "category_of_priors"]


def forward_priors(model: str, config: Mapping[str, Any]) -> tuple[str, ...]:
    """Priors of a task-1 model ``model`` (family name) with ``config`` (a ``ModelConfig``
    dict): ``carve`` for the site scorer; ``lattice-sites`` and ``sphere-boundary`` for a
    site-assignment head (``site_features``: its scores carry a fixed penalty per Å outside R);
    ``sphere-boundary`` for CDVAE's confinement (``confine_margin >= 0``); ``site-snapping``
    for MatterGen's site filter (``sample_site_tol_angstrom > 0``)."""
    if model == "sitescore":
        return ("carve",)
    out: list[str] = []
    if config.get("site_features"):
        out += ["lattice-sites", "sphere-boundary"]
    if model == "cdvae" and float(config.get("confine_margin", -1.0)) >= 0.0 and "sphere-boundary" not in out:
        out.append("sphere-boundary")
    if model == "mattergen" and float(config.get("sample_site_tol_angstrom", 0.0)) > 0.0:
        out.append("site-snapping")
    return tuple(out)


def inverse_priors(config: Mapping[str, Any]) -> tuple[str, ...]:
    """Priors of a task-2 crystal generator with ``config`` (a ``GenConfig`` dict):
    ``spacegroup-templates`` when it samples under training cells' templates
    (``z_candidates="templates"`` or ``read_rule="template"``), ``profile-refinement`` when
    candidates are ranked against the particle's pair profile (``rank`` ``stretch`` or
    ``refine``), ``central-crop`` with ``crop_radii_angstrom``."""
    out: list[str] = []
    if config.get("z_candidates") == "templates" or config.get("read_rule") == "template":
        out.append("spacegroup-templates")
    if config.get("rank") in ("stretch", "refine"):
        out.append("profile-refinement")
    if config.get("crop_radii_angstrom"):
        out.append("central-crop")
    return tuple(out)


def category_of_priors(priors: tuple[str, ...] | list[str]) -> ModelCategory:
    """``learned`` without priors, else ``learned+prior`` with them (validated)."""
    return check_category(LEARNED_PRIOR if priors else LEARNED, list(priors))
