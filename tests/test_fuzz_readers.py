"""Bounded fuzz tests of every reader: whatever the bytes, a reader returns a
valid object or raises :class:`C2NPInputError` (a clear error) — never another exception,
a hang or unbounded memory. The long-running version is ``tools/fuzz_readers.py``
(atheris); this file runs a few hundred cases in CI. Every crash found becomes a bug fix
with a regression test in the module's own test file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from c2np.errors import C2NPInputError

#: Examples per reader; C2NP_FUZZ_EXAMPLES=2000 for a longer local run.
N_EXAMPLES = int(os.environ.get("C2NP_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=N_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])

CIF = """data_KMgH3
_cell_length_a 4.02
_cell_length_b 4.02
_cell_length_c 4.02
_cell_angle_alpha 90
_cell_angle_beta 90
_cell_angle_gamma 90
_symmetry_space_group_name_H-M 'P m -3 m'
_symmetry_Int_Tables_number 221
loop_
_atom_site_label
_atom_site_type_symbol
_atom_site_fract_x
_atom_site_fract_y
_atom_site_fract_z
_atom_site_occupancy
K1 K 0.5 0.5 0.5 1.0
Mg1 Mg 0 0 0 1.0
H1 H 0.5 0 0 1.0
"""

# tokens a hostile file might hold where numbers and names belong
_NASTY = st.sampled_from(["-4.02", "0", "1e308", "1e-308", "nan", "inf", "-inf", "1e155", "4_1", "170",
                          "180", "'", '"', ";", "loop_", "_atom_site_label", "?", ".", "X", "Xx", "\x00",
                          "\n", "[bold]", "../x", "ü", "9" * 40, "-0", "1(2)", "0.5(", ""])


def _mutate(text: str, data: st.DataObject) -> str:
    """Replace, delete or insert whole tokens, or cut the text, a few times."""
    sep = " " if data.draw(st.booleans()) else "\n"
    tokens = text.split(sep)
    for _ in range(data.draw(st.integers(1, 4))):
        if not tokens:
            break
        i = data.draw(st.integers(0, len(tokens) - 1))
        op = data.draw(st.sampled_from(["replace", "delete", "insert", "cut", "duplicate"]))
        if op == "replace":
            tokens[i] = data.draw(_NASTY)
        elif op == "delete":
            del tokens[i]
        elif op == "insert":
            tokens.insert(i, data.draw(_NASTY))
        elif op == "duplicate":
            tokens.insert(i, tokens[i])
        else:
            tokens = tokens[:i]
    return sep.join(tokens)


def _numbers_in(text: str, data: st.DataObject) -> str:
    """Replace every number of the text, each with a random finite or hostile value."""
    import re

    value = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), _NASTY,
                      st.integers(-10**6, 10**6).map(str))
    return re.sub(r"-?\d+(\.\d+)?", lambda m: data.draw(value), text)


@FUZZ
@given(data=st.data())
def test_cif_reader(data: st.DataObject) -> None:
    from c2np.cells import UnitCell, read_cif_text

    text = _mutate(CIF, data) if data.draw(st.booleans()) else _numbers_in(CIF, data)
    try:
        cell = read_cif_text(text, source="fuzz.cif")
    except C2NPInputError:
        return
    assert isinstance(cell, UnitCell) and cell.n_atoms >= 1
    assert np.all(np.isfinite(cell.lattice_angstrom)) and cell.volume_angstrom3 > 0


@FUZZ
@given(raw=st.binary(max_size=400))
def test_cif_reader_on_bytes(raw: bytes) -> None:
    from c2np.cells import read_cif_text

    try:
        read_cif_text(raw.decode("utf-8", errors="replace"), source="fuzz.cif")
    except C2NPInputError:
        pass


XYZ = "3\ncomment\nK 0.0 0.0 0.0\nMg 2.01 0.0 0.0\nH 0.0 2.01 0.0\n"
EXTXYZ = ('2\nProperties=species:S:1:pos:R:3 sample_id=KMgH3/R6/rot_0 pbc="F F F"\nK 0 0 0\nH 1 1 1\n'
          '1\nProperties=species:S:1:pos:R:3 sample_id=KMgH3/R6/rot_1\nMg 0.5 0.5 0.5\n')
CSV = ("sample_id,a,b,c,alpha,beta,gamma,spacegroup\n"
       "s1,4.02,4.02,4.02,90,90,90,221\n\"s,2\",5.5,5.6,7.7,90,90,120,194\n")


@FUZZ
@given(data=st.data())
def test_xyz_particle_reader(tmp_path: Path, data: st.DataObject) -> None:
    from c2np.particle_io import read_particle

    path = tmp_path / "p.xyz"
    path.write_text(_mutate(XYZ, data) if data.draw(st.booleans()) else _numbers_in(XYZ, data), encoding="utf-8")
    try:
        p = read_particle(path)
    except C2NPInputError:
        return
    assert p.n_atoms >= 1 and np.all(np.isfinite(p.positions_angstrom)) and np.all(p.numbers >= 1)


@FUZZ
@given(data=st.data())
def test_forward_predictions_extxyz_reader(tmp_path: Path, data: st.DataObject) -> None:
    from c2np.predictions import iter_forward_predictions

    path = tmp_path / "p.extxyz"
    path.write_text(_mutate(EXTXYZ, data) if data.draw(st.booleans()) else _numbers_in(EXTXYZ, data),
                    encoding="utf-8")
    try:
        rows = list(iter_forward_predictions(path))
    except C2NPInputError:
        return
    for _place, sid, numbers, pos in rows:
        assert isinstance(sid, str) and sid and pos.shape == (len(numbers), 3)
        assert np.all((numbers >= 1) & (numbers <= 118))


@FUZZ
@given(data=st.data())
def test_inverse_predictions_csv_reader(tmp_path: Path, data: st.DataObject) -> None:
    from c2np.predictions import read_inverse_predictions

    path = tmp_path / "p.csv"
    path.write_text(_mutate(CSV, data) if data.draw(st.booleans()) else _numbers_in(CSV, data), encoding="utf-8")
    try:
        rows = read_inverse_predictions(path)
    except C2NPInputError:
        return
    for sid, row in rows.items():
        assert sid and row.params.shape == (6,)


@FUZZ
@given(n_ids=st.integers(0, 4), offsets=st.lists(st.integers(-5, 10**9), max_size=6),
       numbers=st.lists(st.integers(-300, 300), max_size=8), n_pos=st.integers(0, 10),
       declared=st.sampled_from([0, 10**5, 10**8, 3 * 10**8]), fmt=st.sampled_from(["c2np-forward-predictions", "x"]))
def test_forward_predictions_hdf5_reader(tmp_path: Path, n_ids: int, offsets: list, numbers: list, n_pos: int,
                                         declared: int, fmt: str) -> None:
    import h5py

    from c2np.predictions import iter_forward_predictions

    path = tmp_path / "p.h5"
    with h5py.File(path, "w") as f:
        f.attrs["format"] = fmt
        f.create_dataset("sample_ids", data=np.array([f"s{i}" for i in range(n_ids)], dtype="S"))
        f.create_dataset("offsets", data=np.array(offsets, dtype=np.int64))
        f.create_dataset("numbers", data=np.array(numbers, dtype=np.int64))
        if declared:  # a tiny file declaring a huge array (nothing written)
            f.create_dataset("positions", shape=(declared, 3), dtype="f4", chunks=(4096, 3), compression="gzip")
        else:
            f.create_dataset("positions", data=np.ones((n_pos, 3)))
    try:
        rows = list(iter_forward_predictions(path))
    except C2NPInputError:
        return
    for _place, _sid, nums, pos in rows:
        assert pos.shape == (len(nums), 3)


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from c2np.store import build_store
    from helpers import perovskite

    return build_store([perovskite()], tmp_path_factory.mktemp("fz") / "s.h5", radii_angstrom=[6],
                       progress=False)


_STORE_EDITS = st.sampled_from([
    ("cells/atom_offsets", "values"), ("cells/lattice", "values"), ("cells/numbers", "values"),
    ("recipes/material_index", "values"), ("recipes/split", "values"), ("recipes/radius", "values"),
    ("recipes/quaternion", "values"), ("base/offsets", "values"), ("base/numbers", "values"),
    ("base/positions", "values"), ("base/radius", "values"), ("cells/material_ids", "values"),
    ("base/positions", "shape"), ("recipes/quaternion", "shape"), ("base/offsets", "shape"),
    ("cells/frac", "delete"), ("recipes", "attr-materials"), ("", "attr-format_version"),
    ("", "attr-fingerprint"), ("", "attr-centre_frac"), ("", "attr-summary"), ("recipes", "attr-heldout"),
])
_VALUES = st.sampled_from([-1, 0, 1, 7, 2**31 - 1, -2**31, 10**9, float("nan"), float("inf"), 1e308, 255])


@FUZZ
@given(edits=st.lists(st.tuples(_STORE_EDITS, _VALUES, st.integers(0, 10**6)), min_size=1, max_size=3))
def test_store_reader_on_crafted_stores(good_store: Path, tmp_path: Path, edits: list) -> None:
    import h5py

    from c2np.store import DatasetStore

    path = tmp_path / "crafted.h5"
    shutil.copy(good_store, path)
    with h5py.File(path, "r+") as f:
        for (name, kind), value, where in edits:
            if kind == "values":
                if name not in f:
                    continue
                ds = f[name]
                flat = ds[()].reshape(-1).copy()
                if len(flat) == 0:
                    continue
                try:
                    flat[where % len(flat)] = value if flat.dtype.kind != "S" else str(value).encode()
                except (OverflowError, ValueError):
                    continue
                ds[...] = flat.reshape(ds.shape)
            elif kind == "shape":
                if name not in f:
                    continue
                data = f[name][()]
                del f[name]
                f.create_dataset(name, data=data.reshape(-1)[: max(0, data.size - 1 - where % 3)])
            elif kind == "delete":
                if name in f:
                    del f[name]
            else:
                obj = f[name] if name else f
                key = kind.split("-", 1)[1]
                key = {"heldout": "heldout_materials"}.get(key, key)
                obj.attrs[key] = {0: "[]", 1: '["../evil"]', 7: "{", 255: '"x"'}.get(value, str(value)) \
                    if key in ("materials", "heldout_materials", "summary") else value
    try:
        store = DatasetStore.open(path)
    except C2NPInputError:
        return
    # an opened store must be usable: every sample's particle can be made
    for row in (0, len(store) - 1):
        p = store.particle(row)
        assert np.all(np.isfinite(p.positions_angstrom))


@settings(max_examples=max(30, N_EXAMPLES // 2), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 10**7), flips=st.lists(st.tuples(st.integers(0, 10**7), st.integers(1, 255)), max_size=8))
def test_store_reader_on_damaged_bytes(good_store: Path, tmp_path: Path, cut: int, flips: list) -> None:
    from c2np.store import DatasetStore

    data = bytearray(good_store.read_bytes())
    for pos, xor in flips:
        data[pos % len(data)] ^= xor
    if cut % 3 == 0:
        data = data[: cut % len(data)]
    path = tmp_path / "damaged.h5"
    path.write_bytes(bytes(data))
    try:
        store = DatasetStore.open(path)
    except C2NPInputError:
        return
    assert len(store) >= 0
