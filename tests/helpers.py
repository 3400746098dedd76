"""Helpers shared by the tests: small crystals built in code and a tiny dataset store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from c2np.cells import UnitCell


def perovskite(a: float = 4.02, ids: str = "KMgH3", A: int = 19, B: int = 12) -> UnitCell:
    """Cubic ABH3 with B at the origin."""
    return UnitCell(ids, np.eye(3) * a, [A, B, 1, 1, 1],
                    [[0.5, 0.5, 0.5], [0, 0, 0], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]])


def crystal_zoo() -> dict[str, UnitCell]:
    """Cells of each crystal family used by the carving tests."""
    from ase.build import bulk
    from ase.spacegroup import crystal

    zoo = {
        "cubic": perovskite(),
        "tetragonal": UnitCell.from_ase(crystal(["Ti", "O"], [(0, 0, 0), (0.3, 0.3, 0)], spacegroup=136,
                                                cellpar=[4.59, 4.59, 2.96, 90, 90, 90]), "TiO2"),
        "orthorhombic": UnitCell.from_ase(crystal(["Na", "Mg", "H", "H"],
                                                  [(0.0456, 0.25, 0.989), (0, 0, 0.5), (0.471, 0.25, 0.087),
                                                   (0.302, 0.055, 0.703)], spacegroup=62,
                                                  cellpar=[5.46, 7.70, 5.41, 90, 90, 90]), "NaMgH3"),
        "hexagonal": UnitCell.from_ase(bulk("Mg", "hcp", a=3.21, c=5.21), "Mg"),
        "trigonal": UnitCell.from_ase(crystal(["Bi"], [(0, 0, 0.2339)], spacegroup=166,
                                              cellpar=[4.546, 4.546, 11.86, 90, 90, 120]), "Bi"),
        "monoclinic": UnitCell("mono", [[5.1, 0, 0], [0, 5.2, 0], [-1.2, 0, 5.3]], [8, 22, 8],
                               [[0.1, 0.2, 0.3], [0.45, 0.25, 0.5], [0.7, 0.6, 0.15]]),
    }
    return zoo


def two_perovskite_store(path: Path, radii_angstrom: tuple[int, ...] = (6, 10)) -> Path:
    """A store of cubic KMgH3 and NaMgH3 (protocol ``paper``) at ``radii_angstrom``."""
    from c2np.store import build_store

    cells = [perovskite(), perovskite(a=3.9, ids="NaMgH3", A=11)]
    return build_store(cells, path, radii_angstrom=list(radii_angstrom), progress=False)


PRETRAINED = Path(__file__).resolve().parents[1] / "pretrained"


def cheap_generator_copy(name: str, dst: Path, *, n_samples: int, sample_steps: int, refine_evals: int,
                         spacegroups: tuple[int, ...] = (62, 221), every_template: bool = False) -> Path:
    """A shipped task-2 generator folder copied to ``dst`` with few samples and short fits (the
    test's cost, not the shipped settings), keeping the templates of ``spacegroups``: the first
    of each group, or ``every_template`` of those groups."""
    shutil.copytree(PRETRAINED / name, dst)
    meta = json.loads((dst / "config.json").read_text())
    meta["config"].update(n_samples=n_samples, sample_steps=sample_steps, refine_screen_evals=0,
                          refine_evals=refine_evals)
    (dst / "config.json").write_text(json.dumps(meta))
    templates = json.loads((dst / "templates.json").read_text())
    keep = ([t for t in templates if t["spacegroup"] in spacegroups] if every_template
            else [next(t for t in templates if t["spacegroup"] == sg) for sg in spacegroups])
    (dst / "templates.json").write_text(json.dumps(keep))
    return dst
