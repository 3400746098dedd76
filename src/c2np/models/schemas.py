"""Schemas (:mod:`c2np.structured`) of the JSON files in model folders: a training run folder
(``config.json``, ``state.json``, ``best/state.json``, ``reference_fidelity.json``), a task-2
crystal generator folder (``config.json``, ``templates.json``) and the record of a partial
prediction file (``PART.json`` of ``predict --shard``).

Torch-free. The configuration schemas are derived from the dataclass fields
(:func:`dataclass_schema`: the type of each field from its annotation, its range from
:data:`MODEL_CONFIG_RANGES` / :data:`GEN_CONFIG_RANGES`), so a field added to a config without a
range is still typed, and an unknown key is refused. Sizes that allocate memory (``hidden``,
``layers``) are checked against :mod:`c2np.limits` by the readers, after these schemas.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from c2np.models import MODEL_NAMES, TASKS
from c2np.models.config import ModelConfig
from c2np.models.inverse.config import PROCESSES, RANK_RULES, READ_RULES, SAMPLERS, Z_CANDIDATES, GenConfig
from c2np.sharding import SHARD_ENTRY_SCHEMA

__all__ = ["dataclass_schema", "MODEL_CONFIG_SCHEMA", "RUN_META_SCHEMA", "STATE_SCHEMA", "BEST_STATE_SCHEMA",
           "REFERENCE_FIDELITY_SCHEMA", "GEN_CONFIG_SCHEMA", "GENERATOR_META_SCHEMA", "TEMPLATES_SCHEMA",
           "PARTIAL_PREDICTIONS_RECORD_SCHEMA", "MODEL_CONFIG_RANGES", "GEN_CONFIG_RANGES", "MAX_STEPS"]

#: Largest count of steps, levels or evaluations (a schedule of this many floats is 8 MB).
MAX_STEPS = 1_000_000
_INT32 = 2**31 - 1
_SEED = {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
_U128 = {"type": "integer", "minimum": 0, "maximum": 2**128 - 1}
_NAME = {"type": "string", "maxLength": 1000}
_HEX64 = {"type": "string", "pattern": r"^[0-9a-f]{64}$"}


def _rng(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
         hi_open: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if lo is not None:
        out["exclusiveMinimum" if lo_open else "minimum"] = lo
    if hi is not None:
        out["exclusiveMaximum" if hi_open else "maximum"] = hi
    return out


_SIZE = _rng(1, _INT32)          # a count that must be at least one
_WIDTH = _rng(1, 1_000_000)      # a network width (its parameters are then checked against weights_bytes)
_COUNT = _rng(0, _INT32)
_STEPS = _rng(1, MAX_STEPS)
_FRACTION = _rng(0, 1)
_NONNEG = _rng(0)

#: Range of each :class:`~c2np.models.config.ModelConfig` field (JSON Schema keywords).
MODEL_CONFIG_RANGES: dict[str, dict[str, Any]] = {
    "name": {"maxLength": 64}, "hidden": _WIDTH, "layers": _COUNT, "knn": _rng(1, 10_000),
    "cutoff_angstrom": _rng(0, 1_000, lo_open=True), "latent_dim": _WIDTH, "heads": _rng(1, 4096),
    "epochs": _COUNT, "steps_per_epoch": _COUNT, "batch_size": _rng(1, 1_000_000), "lr": _NONNEG,
    "weight_decay": _NONNEG, "grad_clip": _NONNEG, "lr_schedule": {"enum": ["constant", "cosine"]},
    "warmup_steps": _COUNT, "min_lr_ratio": _FRACTION, "ema_decay": _FRACTION, "site_k": _rng(1, 1000),
    "exclusion_iters": _rng(0, 10_000), "sample_exclusion_iters": _rng(0, 10_000),
    "sample_count_margin": _NONNEG, "sample_site_tol_angstrom": _NONNEG,
    "sample_time_power": _rng(0, lo_open=True), "sample_eps_t": _rng(0, 1, hi_open=True),
    "corrector_steps": _rng(0, 1000), "corrector_step": _NONNEG, "anti_anneal": _NONNEG,
    "langevin_step": _NONNEG, "confine_margin": _rng(-1), "ae_fraction": _FRACTION,
    "max_train_seconds": _NONNEG, "dit_layers": _COUNT, "max_train_radius_angstrom": _rng(0, lo_open=True),
    "max_atoms": _SIZE, "sample_steps": _STEPS, "langevin_levels": _STEPS, "cfg_drop": _FRACTION,
    "site_margin_angstrom": _NONNEG, "n_fidelity": _COUNT, "n_val": _COUNT, "eval_per_group": _COUNT,
}

#: Range of each :class:`~c2np.models.inverse.config.GenConfig` field.
GEN_CONFIG_RANGES: dict[str, dict[str, Any]] = {
    "process": {"enum": list(PROCESSES)}, "hidden": _WIDTH, "layers": _COUNT, "n_freq": _rng(0, 1000),
    "steps": _STEPS, "sigma_min": _rng(0, lo_open=True), "sigma_max": _rng(0, lo_open=True),
    "train_steps": _COUNT, "batch": _rng(1, 1_000_000), "lr": _NONNEG, "seed": _SEED, "n_samples": _rng(1, 10_000),
    "sampler": {"enum": list(SAMPLERS)}, "lattice_param": {"enum": ["eps", "x0"]}, "step_lr": _NONNEG,
    "lattice_weight": _NONNEG, "read_rule": {"enum": list(READ_RULES)}, "mid_t_fraction": _FRACTION,
    "min_pair_angstrom": _NONNEG, "sample_steps": _rng(0, MAX_STEPS), "z_candidates": {"enum": list(Z_CANDIDATES)},
    "rank": {"enum": list(RANK_RULES)}, "refine_top": _rng(0, 1000), "refine_evals": _STEPS,
    "refine_screen_evals": _rng(0, MAX_STEPS), "refine_coord_starts": _rng(0, 1000),
    "refine_shape_starts": {"maxItems": 100, "items": {"type": "number", **_rng(0, 1, lo_open=True, hi_open=True)}},
    "symmetric_margin": _NONNEG, "symmetric_margin_rel": _NONNEG, "symmetric_margin_per_angstrom": _NONNEG,
    "anneal_slope": _NONNEG, "type_known_fraction": _FRACTION, "ld_steps_per_level": _rng(1, 10_000),
    "spacegroups": {"maxItems": 230, "uniqueItems": True, "items": {"type": "integer", **_rng(1, 230)}},
    "spacegroup_drop_fraction": _rng(0, 1, hi_open=True),
    "crop_radii_angstrom": {"maxItems": 100, "items": {"type": "number", **_rng(0, lo_open=True)}},
    "crop_max_noise_angstrom": _NONNEG,
}

_ANNOTATION_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean"}


def _annotation_schema(text: str) -> dict[str, Any]:
    """The JSON type of a field annotation (``"int"``, ``"float | None"``, ``"tuple[int, ...]"``)."""
    kinds = [t.strip() for t in text.split("|")]
    types = []
    for k in kinds:
        if k == "None":
            types.append("null")
        elif k.startswith("tuple["):
            types.append("array")
        else:
            types.append(_ANNOTATION_TYPES[k])
    return {"type": types[0] if len(types) == 1 else types}


def dataclass_schema(cls: Any, ranges: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The object schema of the dataclass ``cls``'s fields: each typed from its annotation and
    ranged by ``ranges``; any other key is refused. Every key of ``ranges`` must be a field."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(ranges) - names
    if unknown:
        raise ValueError(f"ranges of unknown {cls.__name__} fields: {sorted(unknown)}")
    props: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        base = _annotation_schema(str(f.type))
        if "string" in str(base["type"]):
            base["maxLength"] = 1000
        props[f.name] = {**base, **ranges.get(f.name, {})}
    return {"type": "object", "properties": props, "additionalProperties": False}


MODEL_CONFIG_SCHEMA = dataclass_schema(ModelConfig, MODEL_CONFIG_RANGES)
GEN_CONFIG_SCHEMA = dataclass_schema(GenConfig, GEN_CONFIG_RANGES)

_NAMES = {"type": "array", "items": _NAME}
_RADII = {"type": "array", "items": {"type": "number", "minimum": 0}}

#: ``config.json`` of a training run folder.
RUN_META_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["model", "task", "config"],
    "properties": {"model": {"enum": list(MODEL_NAMES)}, "task": {"enum": list(TASKS)},
                   "config": MODEL_CONFIG_SCHEMA, "seed": _SEED, "protocol": _NAME, "fingerprint": _NAME,
                   "data": {"type": "object", "required": ["train_materials", "train_radii"], "properties": {
                       "train_materials": _NAMES, "val_materials": _NAMES, "heldout_materials": _NAMES,
                       "train_radii": _RADII, "val_radii": _RADII,
                       "n_train_rows": _rng(0, 2**40) | {"type": "integer"},
                       "n_val_rows": _rng(0, 2**40) | {"type": "integer"}}},
                   "device": _NAME},
}

#: ``checkpoint/state.json`` (numbers may be NaN: a metric that failed is logged as NaN).
STATE_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["epoch", "step"],
    "properties": {"epoch": {"type": "integer", **_COUNT}, "step": {"type": "integer", "minimum": 0, "maximum": 2**62},
                   "ema_updates": {"type": "integer", "minimum": 0, "maximum": 2**62},
                   "numpy_rng": {"type": "object", "required": ["bit_generator", "state"],
                                 "properties": {"bit_generator": {"const": "PCG64"},
                                                "state": {"type": "object", "required": ["state", "inc"],
                                                          "properties": {"state": _U128,
                                                                         "inc": _U128}},
                                                "has_uint32": {"type": "integer", **_rng(0, 1)},
                                                "uinteger": {"type": "integer", **_rng(0, 2**32 - 1)}}},
                   "best": {"type": "object"}},
}

#: ``best/state.json``: the epoch kept as the best.
BEST_STATE_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["epoch", "step"],
    "properties": {"epoch": {"type": "integer", **_COUNT}, "step": {"type": "integer", "minimum": 0, "maximum": 2**62},
                   "key": {"type": "array", "maxItems": 100, "items": {"type": "number"}},
                   "selection": {"type": "array", "maxItems": 100, "items": _NAME}},
}

#: ``reference_fidelity.json``: the reference baselines scored on a run's fidelity rows.
REFERENCE_FIDELITY_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["sample_ids", "baselines"],
    "properties": {"sample_ids": {"type": "array", "items": _NAME},
                   "baselines": {"type": "object", "additionalProperties": {
                       "type": "object", "additionalProperties": {"type": ["number", "null"]}}}},
}

#: ``config.json`` of a crystal generator folder (``n_desc`` and ``kind`` are checked by the reader).
GENERATOR_META_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["kind", "config", "compositions", "n_desc"],
    "properties": {"kind": _NAME, "config": GEN_CONFIG_SCHEMA, "n_desc": {"type": "integer"},
                   "compositions": {"type": "array", "minItems": 1, "maxItems": 100_000, "items": {
                       "type": "array", "minItems": 1, "maxItems": 16,
                       "items": {"type": "integer", **_rng(0, 10_000)}}}},
}

_INT_LIST = {"type": "array", "maxItems": 100_000, "items": {"type": "integer", **_rng(-1_000_000, 1_000_000)}}
_NUMBERS = {"type": "array", "maxItems": 100_000,
            "items": {"type": ["number", "array"], "maxItems": 16, "items": {"type": ["number", "array"]}}}

#: ``templates.json`` of a generator folder: a list of space-group cell templates.
TEMPLATES_SCHEMA: dict[str, Any] = {
    "type": "array", "maxItems": 100_000, "items": {
        "type": "object",
        "required": ["spacegroup", "slots", "rotations", "translations", "perm", "wyckoffs", "materials",
                     "lattice_angstrom", "frac"],
        "properties": {"spacegroup": {"type": "integer", **_rng(1, 230)}, "slots": _INT_LIST,
                       "rotations": {"type": "array", "maxItems": 192}, "translations": {"type": "array",
                                                                                        "maxItems": 192},
                       "perm": {"type": "array", "maxItems": 192}, "wyckoffs": {"type": "array", "items": _NAME},
                       "materials": {"type": "array", "items": _NAME}, "lattice_angstrom": _NUMBERS,
                       "frac": _NUMBERS}}}

#: ``PART.json``, the record beside the file of ``predict --shard I/N``.
PARTIAL_PREDICTIONS_RECORD_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["schema", "run", "shard", "n_rows", "sample_ids_sha256", "positions"],
    "properties": {
        "schema": _NAME,
        "run": {"type": "object", "required": ["task", "batch"],
                "properties": {"task": {"enum": ["forward", "inverse"]}, "batch": _rng(1, 1_000_000) | {
                    "type": "integer"}, "seed": _SEED, "model": _NAME, "split": _NAME, "subset": _NAME}},
        "shard": SHARD_ENTRY_SCHEMA,
        "n_rows": {"type": "integer", "minimum": 0, "maximum": 2**40},
        "sample_ids_sha256": _HEX64,
        "positions": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 2**40}},
        "seconds": {"type": "number", "minimum": 0},
    },
}
