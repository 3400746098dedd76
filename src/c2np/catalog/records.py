"""Provenance records of the catalog and the ``catalog.json`` document that holds them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from c2np.errors import C2NPInputError

__all__ = ["SCHEMA_VERSION", "PrototypeResult", "CatalogEntry", "parse_catalog_document"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class PrototypeResult:
    """Outcome of relaxing one prototype of one composition.

    ``status`` is ``ok``, ``rejected`` (unphysical or not converged; ``reason`` says why)
    or ``error`` (the potential raised). Energies in eV/atom, forces eV/Å, stress GPa.
    """

    prototype: str
    status: str
    reason: str
    n_atoms: int
    energy_per_atom_ev: float | None
    n_steps: int
    converged: bool
    max_force_ev_per_angstrom: float | None
    max_stress_gpa: float | None
    spacegroup_symprec_1e_3: int | None
    volume_ratio: float | None
    shortest_distance_angstrom: float | None
    start_a_angstrom: float
    time_s: float


@dataclass(frozen=True)
class CatalogEntry:
    """Provenance record of one catalog material (one item of ``catalog.json``).

    Lattice parameters are those of the standardized conventional cell (spglib, symprec
    1e-3 Å), which is also the cell written to the CIF. ``status`` is ``ok`` or
    ``failed`` (then ``reason`` says why and no CIF is shipped). ``structure_type`` names
    the type (``perovskite-Pnma``, ``2H``, ``RP1``, ...; :mod:`c2np.catalog.structure_types`),
    ``prototype_compound`` its archetype (``BaNiO3``), ``species`` the elements on its roles
    (``A``, ``B``, ``B2``), ``energy_above_polymorph_ev_per_atom`` the energy above the
    lowest catalog material of the same reduced composition (0 for the lowest).
    """

    material_id: str
    formula: str
    a_site: str
    b_site: str
    status: str
    reason: str
    chosen_prototype: str | None
    prototype_energies_ev_per_atom: dict[str, float | None]
    energy_per_atom_ev: float | None
    max_force_ev_per_angstrom: float | None
    max_stress_gpa: float | None
    spacegroup_symprec_1e_3: int | None
    spacegroup_symprec_1e_1: int | None
    international_symprec_1e_3: str | None
    lattice_parameters: dict[str, float] | None
    n_atoms_conventional: int | None
    shortest_distance_angstrom: float | None
    tolerance_factor: float
    potential: str
    potential_version: str
    fmax_ev_per_angstrom: float
    optimizer: str
    max_steps: int
    symmetry_library: str
    time_s: float
    prototypes: tuple[PrototypeResult, ...] = field(default=())
    structure_type: str | None = None
    prototype_compound: str | None = None
    species: dict[str, str] | None = None
    energy_above_polymorph_ev_per_atom: float | None = None

    @property
    def structure_type_name(self) -> str:
        """The structure type: ``structure_type``, or for an ABH3 perovskite record written
        before the field existed ``perovskite-<chosen prototype>``."""
        if self.structure_type:
            return self.structure_type
        return f"perovskite-{self.chosen_prototype}" if self.chosen_prototype else "unknown"

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        d = asdict(self)
        d["prototypes"] = [asdict(p) for p in self.prototypes]
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CatalogEntry:
        """Inverse of :meth:`to_dict`."""
        try:
            d = dict(data)
            d["prototypes"] = tuple(PrototypeResult(**p) for p in d.get("prototypes", []))
            return cls(**d)
        except (TypeError, ValueError) as exc:  # a missing, extra or malformed field
            name = data.get("material_id") if isinstance(data, dict) else None
            raise C2NPInputError(f"catalog record {name!r} is malformed: {exc}") from exc


def parse_catalog_document(text: str, *, source: str) -> dict[str, Any]:
    """The parsed ``catalog.json`` text; malformed JSON or a document without ``materials``
    and ``failures`` raises :class:`C2NPInputError` naming ``source``."""
    from c2np.structured import parse_json

    # the guarded parser (nesting, integer digits, a key given twice); NaN as json.dumps writes it
    data = parse_json(text, source=source, what="catalog file", finite=False)
    if not isinstance(data, dict) or "materials" not in data or "failures" not in data:
        raise C2NPInputError(f"{source}: not a c2np catalog file (needs 'materials' and 'failures')")
    return data
