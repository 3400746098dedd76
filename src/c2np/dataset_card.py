"""The dataset card (``README.md``) of a Parquet export: what the files hold, every field with
its unit, the splits, the licence and the fingerprint; its YAML header names the tables as
configurations for the Hugging Face ``datasets`` library."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from c2np.store import DatasetStore

__all__ = ["FIELDS", "dataset_card"]

#: (table, column, type, unit, meaning) of every exported field
FIELDS: tuple[tuple[str, str, str, str, str], ...] = (
    ("recipes", "sample_id", "string", "", "`{material}/R{radius}/rot_{k}`, the store's sample id"),
    ("recipes", "material", "string", "", "material id (a row of cells.parquet)"),
    ("recipes", "material_index", "int32", "", "index into the export's material list"),
    ("recipes", "radius_angstrom", "int32", "Å", "sphere radius"),
    ("recipes", "rotation_index", "int32", "", "rotation k of the (material, R) orientation set; 0 is the identity"),
    ("recipes", "quaternion_xyzw", "list<float64>[4]", "", "rotation as a scalar-last unit quaternion"),
    ("recipes", "split", "string", "",
     "`train` / `val`: rows a model may learn from; `id` / `ood`: evaluation radii; `heldout`: training and "
     "validation radii of a held-out material"),
    ("recipes", "radius_split", "string", "", "the protocol's split of the radius (train, val, id, ood)"),
    ("recipes", "heldout_material", "bool", "", "the material is held out of training (protocol `strict`)"),
    ("recipes", "base_index", "int32", "", "row of base.parquet holding this sample's unrotated particle"),
    ("base", "material", "string", "", "material id"),
    ("base", "material_index", "int32", "", "index into the export's material list"),
    ("base", "radius_angstrom", "int32", "Å", "sphere radius"),
    ("base", "n_atoms", "int32", "", "atoms in the particle"),
    ("base", "numbers", "list<uint8>", "", "atomic numbers, canonical order"),
    ("base", "positions_angstrom", "list<list<float32>[3]>", "Å",
     "unrotated Cartesian positions, centred on the carving centre"),
    ("base", "boundary_margin_angstrom", "float64", "Å", "carve diagnostic: smallest | |x - c| - R | over "
     "candidate atoms (how close an atom sits to the sphere surface)"),
    ("base", "paper_supercell_clipped", "bool", "", "carve diagnostic: 10 x the smallest interplanar "
     "spacing < R (the original generator's supercell clips this sphere)"),
    ("cells", "material", "string", "", "material id"),
    ("cells", "lattice_angstrom", "list<list<float64>[3]>[3]", "Å", "lattice vectors as rows"),
    ("cells", "numbers", "list<int64>", "", "atomic numbers of the basis"),
    ("cells", "frac_coords", "list<list<float64>[3]>", "", "fractional coordinates of the basis"),
    ("samples", "sample_id", "string", "", "the store's sample id"),
    ("samples", "split", "string", "", "the split it was materialised from"),
    ("samples", "radius_angstrom", "int32", "Å", "sphere radius"),
    ("samples", "quaternion_xyzw", "list<float64>[4]", "", "rotation, scalar-last"),
    ("samples", "numbers", "list<uint8>", "", "atomic numbers"),
    ("samples", "positions_angstrom", "list<list<float32>[3]>", "Å", "rotated Cartesian positions (the particle)"),
    ("samples", "material", "string or null", "", "material id (train / val rows only)"),
    ("samples", "lattice_parameters", "list<float64>[6] or null", "Å, °",
     "task-2 target: a, b, c (Å), alpha, beta, gamma (°) of the standardized conventional cell "
     "(train / val rows only)"),
    ("samples", "spacegroup", "int32 or null", "", "task-2 target: international space-group number "
     "(train / val rows only)"),
)


def dataset_card(store: DatasetStore, counts: Mapping[str, int], meta: Mapping[str, Any], *,
                 materialised: Sequence[str] = ()) -> str:
    """The card's Markdown text (YAML header, then the sections)."""
    tables = [t for t in ("recipes", "base", "cells", "samples") if t in counts]
    configs = "".join(f"  - config_name: {t}\n    data_files: {t}.parquet\n" for t in tables)
    lic = str(meta["license"])
    lines = [
        "---", f"license: {lic}", "pretty_name: C2NP nanoparticles", "tags: [chemistry, materials, nanoparticles]",
        "configs:", configs.rstrip("\n"), "---", "",
        "# C2NP: crystal-to-nanoparticle dataset (Parquet export)", "",
        "Spherical nanoparticles carved from crystals. Task 1 (forward): unit cell + radius + rotation -> "
        "particle. Task 2 (inverse): particle -> standardized lattice parameters + space group.", "",
        f"* fingerprint: `{meta['fingerprint']}` (SHA-256 over the cells, the recipe table and the base "
        "particles rounded to 1e-5 Å; `c2np verify-export` recomputes it)",
        f"* protocol: `{meta['protocol']}`; materials: {len(meta['materials'])}; samples: {meta['n_samples']}",
        f"* held-out materials: {', '.join(meta['heldout_materials']) or 'none'}",
        f"* carving centre (fractional): {meta['centre_frac']}",
        f"* written by c2np {meta['c2np_version']}; source: {meta['source']}",
        f"* licence: {lic}. The particles are computed from the unit cells by the c2np carver; a store built "
        "from other cells carries their terms.", "",
        "## Files", "",
        "| file | rows | content |", "|---|---|---|",
    ]
    what = {"recipes": "one row per sample", "base": "one unrotated particle per (material, R)",
            "cells": "one unit cell per material",
            "samples": f"materialised particles of {', '.join(materialised)}"}
    lines += [f"| `{t}.parquet` | {counts[t]} | {what[t]} |" for t in tables]
    lines += ["", "A sample's particle is its base particle rotated: `positions @ R(q).T` with `R(q)` the "
              "rotation matrix of `quaternion_xyzw` (scalar-last), `base_index` naming the base row.", "",
              "## Splits", "",
              "Filter `recipes` on `split`: `train` and `val` hold exactly the rows a model may learn from "
              "(no held-out material, validation radii only in `val`). Evaluate through `c2np.tasks` "
              "(ForwardTask / InverseTask), which chooses the scored rows.", "",
              "## Fields", "", "| table | column | type | unit | meaning |", "|---|---|---|---|---|"]
    lines += [f"| {t} | `{c}` | {ty} | {u} | {m} |" for t, c, ty, u, m in FIELDS if t in tables]
    lines += ["", "## Loading", "", "```python", "import datasets",
              'recipes = datasets.load_dataset("parquet", data_files="recipes.parquet", split="train")',
              "# one table per call: the tables have different columns",
              "import pandas as pd", 'base = pd.read_parquet("base.parquet")', "```", ""]
    return "\n".join(lines)
