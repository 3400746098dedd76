"""What a model knows: its category and the analytic priors it uses.

Every results file, ``model.yml`` and leaderboard row carries a category:

* ``learned``: the network's own generative (or predictive) process produces the positions
  (task 1) or the cell (task 2) from the query alone; no analytic geometry beyond the query.
* ``learned+prior``: a trained network that also uses analytic geometry of the problem; the
  ``priors`` list names each piece (:data:`PRIORS`). Such a model never ranks as learned.
* ``analytic``: no trained network: the analytic carve, the crystallographic solver, the
  random ball, memorisation and composition lookup, the majority class.

Only ``learned`` rows compete in "best learned model".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from c2np.errors import C2NPInputError

__all__ = ["CATEGORIES", "LEARNED", "LEARNED_PRIOR", "ANALYTIC", "UNSTATED", "PRIORS", "PRIOR_TAGS", "ModelCategory",
           "check_category", "category_from_mapping", "name_with_priors"]

LEARNED = "learned"
LEARNED_PRIOR = "learned+prior"
ANALYTIC = "analytic"
CATEGORIES: tuple[str, ...] = (LEARNED, LEARNED_PRIOR, ANALYTIC)
#: the category of a results document whose model was not described (``c2np evaluate``
#: without ``--category``); never a category of a model.yml, never ranked as learned
UNSTATED = "unstated"

#: every named prior, with what it gives the model
PRIORS: dict[str, str] = {
    "lattice-sites": "the crystal's lattice sites inside and around the sphere, computed from the cell, "
                     "as features or as the choices of a site-assignment head",
    "sphere-boundary": "the sphere test |x - c| <= R written into the model (a penalty on sites "
                       "outside R, or positions clamped to the ball)",
    "site-snapping": "sampled atoms moved onto (or kept only near) a lattice site and retyped by the "
                     "site's species",
    "carve": "calls the analytic carver",
    "spacegroup-templates": "samples under the Wyckoff templates (space group, site multiplicities) of "
                            "training cells",
    "profile-ranking": "chooses among generated cells by how well their pair-distance profile matches the "
                       "query particle's",
    "profile-refinement": "refines candidate lattices against the query particle's pair-distance profile",
    "central-crop": "also conditions on the central crop of the particle (a view chosen by hand)",
    "ensemble": "pools the answers of several models and picks one by a rule on the query particle",
}

#: the short tag of each prior in a shipped model's name, e.g. ``mattergen+sites+sphere+snap``
PRIOR_TAGS: dict[str, str] = {
    "lattice-sites": "sites", "sphere-boundary": "sphere", "site-snapping": "snap", "carve": "carve",
    "spacegroup-templates": "templates", "profile-ranking": "rank", "profile-refinement": "refine",
    "central-crop": "crop", "ensemble": "pool",
}


@dataclass(frozen=True)
class ModelCategory:
    """A category and its priors (sorted in :data:`PRIORS` order; empty unless ``learned+prior``)."""

    category: str
    priors: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``learned``, ``analytic``, or ``learned+prior (lattice-sites, sphere-boundary)``."""
        return f"{self.category} ({', '.join(self.priors)})" if self.priors else self.category

    @property
    def is_learned(self) -> bool:
        """True only for ``learned``: the one category that ranks as a learned model."""
        return self.category == LEARNED

    def to_dict(self) -> dict[str, Any]:
        """``{"category": ..., "priors": [...]}``."""
        return {"category": self.category, "priors": list(self.priors)}


def check_category(category: object, priors: object = (), *, where: str = "model") -> ModelCategory:
    """A validated :class:`ModelCategory`; :class:`C2NPInputError` naming ``where`` otherwise.

    ``learned+prior`` needs at least one prior; ``learned`` and ``analytic`` take none; every
    prior must be one of :data:`PRIORS`, each at most once."""
    if category not in CATEGORIES:
        shown = repr(category)[:80]
        raise C2NPInputError(f"{where}: category {shown} is not one of {', '.join(CATEGORIES)}")
    if priors is None:
        priors = ()
    if isinstance(priors, str) or not isinstance(priors, Iterable):
        raise C2NPInputError(f"{where}: priors must be a list of prior names, got {type(priors).__name__}")
    names = list(priors)
    unknown = [p for p in names if p not in PRIORS]
    if unknown:
        shown = repr(unknown[0])[:80]
        raise C2NPInputError(f"{where}: unknown prior {shown}; known priors: {', '.join(PRIORS)}")
    if len(set(names)) != len(names):
        raise C2NPInputError(f"{where}: a prior is listed twice ({', '.join(names)})")
    if category == LEARNED_PRIOR and not names:
        raise C2NPInputError(f"{where}: category {LEARNED_PRIOR} needs the list of its priors "
                             f"(one or more of {', '.join(PRIORS)})")
    if category != LEARNED_PRIOR and names:
        raise C2NPInputError(f"{where}: category {category} takes no priors (got {', '.join(names)}); "
                             f"a model with priors is {LEARNED_PRIOR}")
    order = list(PRIORS)
    return ModelCategory(str(category), tuple(sorted(names, key=order.index)))


def category_from_mapping(data: Mapping[str, Any], *, where: str = "model") -> ModelCategory:
    """The category of a mapping with ``category`` and optional ``priors`` keys (a results
    document's ``model`` entry, a ``model.yml``'s ``model`` block)."""
    if "category" not in data:
        raise C2NPInputError(f"{where}: no category (one of {', '.join(CATEGORIES)})")
    return check_category(data["category"], data.get("priors", ()), where=where)


def name_with_priors(family: str, priors: Iterable[str]) -> str:
    """``family`` followed by the tag of each prior, e.g. ``mattergen+sites+sphere+snap``."""
    order = list(PRIORS)
    tags = [PRIOR_TAGS[p] for p in sorted(priors, key=order.index)]
    return "+".join([family, *tags])
