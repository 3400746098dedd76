"""Stated limits on sizes and counts, checked before memory is allocated (contract §13).

Every limit has a name, a default and a unit; ``c2np --limit NAME=VALUE COMMAND ...`` raises
(or lowers) one for a run. The overrides travel in the environment variable ``C2NP_LIMITS``
(``NAME=VALUE,NAME=VALUE``), so worker processes see the same limits; library users call
:func:`override` (a context manager) or set the variable. A limit exceeded raises
:class:`~c2np.errors.C2NPLimitError` (exit code 2) whose message names the limit and the flag.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from typing import Any

from c2np.errors import C2NPInputError, C2NPLimitError
from c2np.terminal import shortened

__all__ = ["ENV_VAR", "Limits", "LIMIT_DOCS", "current", "override", "parse_overrides", "check",
           "effective", "MAX_LIMIT"]

ENV_VAR = "C2NP_LIMITS"


@dataclass(frozen=True)
class Limits:
    """The limits (see :data:`LIMIT_DOCS` for units and meaning)."""

    atoms_per_particle: int = 2_000_000
    carve_candidates: int = 50_000_000
    radius_angstrom: float = 200.0
    radii_count: int = 1_000
    cell_atoms: int = 100_000
    cif_bytes: int = 50_000_000
    zip_total_bytes: int = 2_000_000_000
    store_bytes: int = 8_000_000_000
    store_compression_ratio: int = 2_000
    store_shards: int = 10_000
    manifest_bytes: int = 100_000_000
    prediction_bytes: int = 4_000_000_000
    prediction_atoms_factor: float = 10.0
    prediction_neighbours: float = 2_000.0
    bootstrap: int = 100_000
    workers: int = 0
    solver_atoms: int = 200_000
    solver_sites: int = 2_000
    solver_symmetry_bytes: int = 2_000_000_000
    solver_symmetry_seconds: float = 10.0
    text_bytes: int = 1_000_000_000
    document_bytes: int = 200_000_000
    yaml_bytes: int = 250_000
    trajectory_bytes: int = 4_000_000_000
    weights_bytes: int = 4_000_000_000
    model_layers: int = 1_000


#: name -> (unit, what it bounds)
LIMIT_DOCS: dict[str, tuple[str, str]] = {
    "atoms_per_particle": ("atoms", "atoms in one carved particle (estimated from the density before carving) "
                                    "or in one particle read from a file"),
    "carve_candidates": ("atom images", "periodic images examined while carving one sphere (flat cells need many)"),
    "radius_angstrom": ("Å", "a carving radius (carve -r, build --radii)"),
    "radii_count": ("radii", "distinct radii in one --radii list"),
    "cell_atoms": ("atoms", "atoms in one unit cell after the CIF's symmetry expansion"),
    "cif_bytes": ("bytes", "size of one CIF file or (uncompressed, checked before decompressing) zip member"),
    "zip_total_bytes": ("bytes", "uncompressed size of all .cif members of one zip"),
    "store_bytes": ("bytes", "uncompressed size of a store's arrays (declared shapes x item size)"),
    "store_compression_ratio": ("x", "declared size / stored size of one compressed HDF5 array "
                                     "(a tiny file declaring huge arrays)"),
    "store_shards": ("shards", "shard files of one sharded store (build --shards, a store manifest)"),
    "manifest_bytes": ("bytes", "size of one sharded store's JSON manifest"),
    "prediction_bytes": ("bytes", "uncompressed size of a predictions file's arrays"),
    "prediction_atoms_factor": ("x reference", "atoms in one predicted particle, as a multiple of the "
                                               "reference's atom count plus 100; beyond it the sample fails"),
    "prediction_neighbours": ("neighbours", "mean neighbours per predicted atom within the pair-histogram range "
                                            "(10 Å; the densest solids have under 900); beyond it the sample "
                                            "fails (e.g. a collapsed cloud), so that scoring it stays bounded"),
    "bootstrap": ("resamples", "bootstrap resamples for confidence intervals"),
    "workers": ("processes", "worker processes (0: twice the CPUs available)"),
    "solver_atoms": ("atoms", "atoms in one particle given to the inverse solver (identify, task 2)"),
    "solver_sites": ("sites", "sites of the reconstructed cell given to the symmetry finder (its work grows "
                              "with their square)"),
    "solver_symmetry_bytes": ("bytes", "address space of the process running one symmetry-finder call (moyopy)"),
    "solver_symmetry_seconds": ("s", "time of one symmetry-finder call (moyopy)"),
    "text_bytes": ("bytes", "one text file read whole (task-2 CSV, run-folder JSON and log, catalog "
                            "document)"),
    "document_bytes": ("bytes", "one JSON document read by the guarded reader (results, partial results, "
                                "merge records), checked before parsing"),
    "yaml_bytes": ("bytes", "one YAML document (model.yml), checked before parsing (YAML parses at about "
                            "1 MB/s)"),
    "trajectory_bytes": ("bytes", "one structure or trajectory file read by identify (LAMMPS dump, POSCAR, "
                                  "PDB, extxyz, .traj, ...), checked before reading"),
    "weights_bytes": ("bytes", "a model's parameters as declared by a model folder: the tensors of one "
                               "safetensors header (checked before they are read), the parameters of the "
                               "network its config.json builds (counted before it is built), and the size of "
                               "an optimizer or random-state file"),
    "model_layers": ("layers", "blocks of a network declared by a config.json (layers, dit_layers)"),
}

#: Largest value of a limit (beyond it sizes overflow 64-bit arithmetic).
MAX_LIMIT = 2**62

_FIELDS = {f.name: f for f in fields(Limits)}


def parse_overrides(text: str, *, source: str = ENV_VAR) -> dict[str, float]:
    """``"name=value,name=value"`` -> {name: value}; unknown names and non-numbers are
    :class:`C2NPInputError` naming ``source``."""
    out: dict[str, float] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in _FIELDS:
            raise C2NPInputError(f"{source}: unknown limit {shortened(name)} in {shortened(part)}; known limits: "
                                 f"{', '.join(_FIELDS)}")
        try:
            if "_" in value:  # float() would read '1_000' as 1000; '4_1' must not become 41
                raise ValueError(value)
            number = float(value)
        except ValueError:
            raise C2NPInputError(f"{source}: limit {name} needs a number, got {shortened(value)}") from None
        if not number >= 0 or number == float("inf"):
            raise C2NPInputError(f"{source}: limit {name} must be a finite number >= 0, got {shortened(value)}")
        if number > MAX_LIMIT:
            raise C2NPInputError(f"{source}: limit {name} must be at most 2**62 ({MAX_LIMIT:.3g}), "
                                 f"got {shortened(value)}")
        out[name] = number
    return out


_CACHE: dict[str, Limits] = {}


def current() -> Limits:
    """The limits in force: the defaults with the overrides of ``C2NP_LIMITS`` applied."""
    text = os.environ.get(ENV_VAR, "")
    if text not in _CACHE:
        values = parse_overrides(text)
        typed: dict[str, Any] = {k: (int(v) if _FIELDS[k].type in (int, "int") else v) for k, v in values.items()}
        _CACHE[text] = replace(Limits(), **typed)
    return _CACHE[text]


@contextlib.contextmanager
def override(**values: float) -> Iterator[Limits]:
    """Run a block with some limits changed (also for worker processes it starts)."""
    merged = {**parse_overrides(os.environ.get(ENV_VAR, "")), **values}
    text = ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in merged.items())
    parse_overrides(text, source="override")
    old = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = text
    try:
        yield current()
    finally:
        if old is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = old


def check(name: str, value: float, *, what: str) -> None:
    """Raise :class:`C2NPLimitError` when ``value`` exceeds the limit ``name``; ``what``
    says what was measured (e.g. ``"dataset.h5: /base/positions"``)."""
    limit = effective(name)
    if value > limit:
        unit = LIMIT_DOCS[name][0]
        raise C2NPLimitError(f"{what}: {_fmt(value)} {unit} exceeds the limit {name} = {_fmt(limit)}; "
                             f"raise it with `c2np --limit {name}=N ...` (or {ENV_VAR}={name}=N)")


def effective(name: str) -> float:
    """The value of limit ``name`` now (``workers`` 0 resolves to twice the CPUs)."""
    value = getattr(current(), name)
    if name == "workers" and value == 0:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return 2 * cpus
    return value


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:g}"
