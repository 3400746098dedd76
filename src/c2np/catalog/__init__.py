"""The material catalog: perovskite hydrides ABH3 and related structure types, relaxed with a
universal potential.

One module per concept (this package only re-exports them):

- :mod:`~c2np.catalog.hydrides`: the 82 ABH3 compositions and their ionic radii;
- :mod:`~c2np.catalog.prototypes`: the four perovskite prototypes (Pm-3m, I4/mcm, R-3c, Pnma);
- :mod:`~c2np.catalog.structure_types`: the prototypes of the other structure types
  (hexagonal polytypes, Ruddlesden-Popper, K2PtCl6, double perovskites);
- :mod:`~c2np.catalog.families`: the compositions of those types;
- :mod:`~c2np.catalog.topology`: the check that a relaxation kept its structure type;
- :mod:`~c2np.catalog.typed_relaxation`: relaxation of one structure-type material and the
  energies above the lowest polymorph;
- :mod:`~c2np.catalog.records`: the provenance records and the ``catalog.json`` document;
- :mod:`~c2np.catalog.relaxation`: CHGNet/SevenNet relaxation of one composition and the
  physical checks (shortest distance, perovskite framework);
- :mod:`~c2np.catalog.build`: the resumable, multi-process build of a catalog folder;
- :mod:`~c2np.catalog.shipped`: the shipped catalog (``c2np/data/catalog``);
- :mod:`~c2np.catalog.textbook`: textbook crystal prototypes (rock salt, rutile, ...) for
  tests, benchmarks and demos.

Nothing heavy is imported here: the potentials, ASE and spglib load inside the functions
that use them.
"""

from c2np.catalog.build import LOCK_NAME, build_catalog, build_lock
from c2np.catalog.families import TypedComposition, typed_compositions, typed_material_ids
from c2np.catalog.hydrides import (
    A_SITES,
    B_SITES,
    INVERSE_PEROVSKITES,
    Composition,
    composition,
    compositions,
    material_ids,
    start_lattice_constant_angstrom,
    tolerance_factor,
)
from c2np.catalog.prototypes import PROTOTYPE_SPACEGROUP, PROTOTYPES, build_prototype
from c2np.catalog.records import (
    SCHEMA_VERSION,
    CatalogEntry,
    PrototypeResult,
    parse_catalog_document,
)
from c2np.catalog.relaxation import (
    ENERGY_TIE_EV_PER_ATOM,
    MAX_VOLUME_RATIO,
    MIN_DISTANCE_ANGSTROM,
    POTENTIALS,
    Potential,
    choose_prototype,
    framework_defect,
    load_potential,
    relax_material,
    relax_prototype,
    shortest_distance_angstrom,
)
from c2np.catalog.shipped import (
    CATALOG_SCOPES,
    catalog_data_dir,
    catalog_entries,
    catalog_failures,
    default_demo_materials,
    get_cell,
    load_catalog,
    scope_material_ids,
    structure_types_of,
)
from c2np.catalog.structure_types import STRUCTURE_TYPES, StructureType, build_structure_type
from c2np.catalog.textbook import (
    TEXTBOOK_PROTOTYPES,
    Prototype,
    prototype_cell,
    prototype_names,
)
from c2np.catalog.topology import coordination_signature, topology_defect

__all__ = [
    # compositions
    "A_SITES", "B_SITES", "INVERSE_PEROVSKITES", "Composition", "compositions", "material_ids",
    "composition", "start_lattice_constant_angstrom", "tolerance_factor",
    # perovskite prototypes
    "PROTOTYPES", "PROTOTYPE_SPACEGROUP", "build_prototype",
    # other structure types
    "STRUCTURE_TYPES", "StructureType", "build_structure_type", "TypedComposition",
    "typed_compositions", "typed_material_ids", "coordination_signature", "topology_defect",
    # records
    "SCHEMA_VERSION", "PrototypeResult", "CatalogEntry", "parse_catalog_document",
    # relaxation
    "POTENTIALS", "MIN_DISTANCE_ANGSTROM", "MAX_VOLUME_RATIO", "ENERGY_TIE_EV_PER_ATOM",
    "Potential", "load_potential", "shortest_distance_angstrom", "framework_defect",
    "relax_prototype", "choose_prototype", "relax_material",
    # build
    "LOCK_NAME", "build_catalog", "build_lock",
    # the shipped catalog
    "catalog_data_dir", "catalog_entries", "catalog_failures", "get_cell", "load_catalog",
    "default_demo_materials", "CATALOG_SCOPES", "scope_material_ids", "structure_types_of",
    # textbook crystals
    "Prototype", "TEXTBOOK_PROTOTYPES", "prototype_cell", "prototype_names",
]
