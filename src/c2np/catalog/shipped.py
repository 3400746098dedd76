"""The shipped catalog: the relaxed cells in ``c2np/data/catalog`` and their provenance."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from c2np.catalog.records import CatalogEntry, parse_catalog_document
from c2np.cells import UnitCell, read_cif_text
from c2np.errors import C2NPInputError

__all__ = [
    "catalog_data_dir",
    "catalog_entries",
    "catalog_failures",
    "get_cell",
    "load_catalog",
    "default_demo_materials",
    "CATALOG_SCOPES",
    "scope_material_ids",
    "structure_types_of",
]

#: Named subsets of the shipped catalog: ``abh3`` the 82 ABH3 perovskites (the four tilt
#: variants; protocols ``paper`` and ``strict``), ``all`` every shipped material.
CATALOG_SCOPES: tuple[str, ...] = ("abh3", "all")


def catalog_data_dir() -> Any:
    """The package data folder of the shipped catalog (an importlib Traversable)."""
    from importlib.resources import files

    return files("c2np") / "data" / "catalog"


def _shipped_document() -> dict[str, Any]:
    res = catalog_data_dir() / "catalog.json"
    if not res.is_file():
        raise C2NPInputError("the shipped catalog is missing (c2np/data/catalog/catalog.json); "
                             "run `c2np catalog build` or reinstall c2np")
    return parse_catalog_document(res.read_text(encoding="utf-8"),
                                  source="c2np/data/catalog/catalog.json")


def catalog_entries() -> list[CatalogEntry]:
    """Provenance records of the shipped materials (status ``ok``), sorted by id."""
    doc = _shipped_document()
    return sorted((CatalogEntry.from_dict(r) for r in doc["materials"]), key=lambda e: e.material_id)


def catalog_failures() -> list[dict[str, Any]]:
    """Failed and not-built compositions of the shipped catalog, with reasons."""
    doc = _shipped_document()
    return list(doc["failures"]) + list(doc.get("not_built", []))


def _shipped_cell(material_id: str) -> UnitCell:
    res = catalog_data_dir() / f"{material_id}.cif"
    if not res.is_file():
        raise C2NPInputError(f"c2np/data/catalog/{material_id}.cif: listed in catalog.json but missing")
    return read_cif_text(res.read_text(encoding="utf-8"), source=f"c2np/data/catalog/{material_id}.cif",
                         material_id=material_id)


def get_cell(material_id: str) -> UnitCell:
    """The shipped relaxed unit cell of ``material_id``; unknown ids raise
    :class:`C2NPInputError` naming the valid ones."""
    ids = [e.material_id for e in catalog_entries()]
    if material_id not in ids:
        raise C2NPInputError(f"unknown catalog material {material_id!r}; valid ids: {', '.join(ids)}")
    return _shipped_cell(material_id)


def scope_material_ids(scope: str) -> list[str]:
    """The shipped ids of a catalog scope (:data:`CATALOG_SCOPES`), sorted."""
    from c2np.catalog.hydrides import material_ids

    if scope not in CATALOG_SCOPES:
        raise C2NPInputError(f"unknown catalog scope {scope!r}; valid: {', '.join(CATALOG_SCOPES)}")
    ids = [e.material_id for e in catalog_entries()]
    if scope == "abh3":
        keep = set(material_ids())
        ids = [m for m in ids if m in keep]
    return ids


def load_catalog(scope: str = "abh3") -> list[UnitCell]:
    """The shipped catalog cells of ``scope`` (default the 82 ABH3 perovskites; ``all``:
    every structure type), sorted by material id."""
    return [_shipped_cell(m) for m in scope_material_ids(scope)]


def structure_types_of(material_ids: Iterable[str]) -> list[str]:
    """The structure type of each id (``perovskite-Pnma``, ``2H``, ...); ``unknown`` for an
    id that is not a shipped material (a cell read from a user's CIF)."""
    try:
        types = {e.material_id: e.structure_type_name for e in catalog_entries()}
    except C2NPInputError:  # no shipped catalog: every type is unknown
        types = {}
    return [types.get(str(m), "unknown") for m in material_ids]


#: A small fixed set spanning cubic, tetragonal, trigonal and orthorhombic perovskites.
_DEMO_CANDIDATES: tuple[str, ...] = ("KMgH3", "NaMgH3", "CsCaH3", "SrLiH3", "RbCaH3", "KCaH3",
                                     "NaCaH3", "KZnH3", "BaLiH3", "CsMgH3")


def default_demo_materials(n: int = 4) -> list[str]:
    """A small fixed list of ``n`` shipped ids covering as many space groups as possible
    (for a five-minute demo). Deterministic: well-known compounds first, then by id, each
    pass taking only space groups not yet covered; then filling up in the same order."""
    entries = {e.material_id: e for e in catalog_entries()}
    order = [m for m in _DEMO_CANDIDATES if m in entries] + sorted(m for m in entries if m not in _DEMO_CANDIDATES)
    picked: list[str] = []
    seen: set[int | None] = set()
    for mid in order:
        sg = entries[mid].spacegroup_symprec_1e_3
        if len(picked) < n and sg not in seen:
            picked.append(mid)
            seen.add(sg)
    for mid in order:
        if len(picked) < n and mid not in picked:
            picked.append(mid)
    return picked
