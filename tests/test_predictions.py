"""Prediction files (c2np.predictions) and the one XYZ parser (c2np.particle_io)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from c2np.errors import C2NPInputError
from c2np.lattice import LatticeParameters
from c2np.particle import Particle
from c2np.particle_io import iter_extxyz, iter_xyz_frames, read_particle, write_extxyz
from c2np.predictions import (
    INVERSE_COLUMNS,
    InversePrediction,
    inverse_values,
    iter_forward_predictions,
    read_inverse_predictions,
    write_forward_predictions,
    write_forward_predictions_h5,
    write_inverse_predictions,
)

SID = "KMgH3/R10/rot_1"


def _preds() -> dict[str, Particle]:
    rng = np.random.default_rng(0)
    return {f"M/R6/rot_{k}": Particle(rng.integers(1, 20, size=k + 1), rng.normal(size=(k + 1, 3)))
            for k in range(3)}


@pytest.mark.parametrize("fmt", ["extxyz", "h5"])
def test_forward_roundtrip(tmp_path: Path, fmt: str) -> None:
    preds = _preds()
    write = write_forward_predictions if fmt == "extxyz" else write_forward_predictions_h5
    path = write(tmp_path / f"p.{fmt}", preds)
    got = {sid: (z, x) for _, sid, z, x in iter_forward_predictions(path)}
    assert list(got) == list(preds)
    atol = 1e-8 if fmt == "extxyz" else 1e-6  # extxyz: 8 decimals; HDF5: float32
    for sid, part in preds.items():
        assert np.array_equal(got[sid][0], part.numbers)
        np.testing.assert_allclose(got[sid][1], part.positions_angstrom, atol=atol)


@pytest.mark.parametrize("body, message", [
    ("x\ncomment\n", r"frame 0 \(line 1\): expected an atom count"),
    (f"2\nsample_id={SID}\nH 0 0 0\n", r"frame 0 \(line 3\): expected 2 atom lines"),
    ("1\nfoo=1\nH 0 0 0\n", r"frame 0 \(line 2\): no sample_id"),
    (f"1\nsample_id={SID}\nXx 0 0 0\n", r"frame 0 \(line 3\): unknown element 'Xx'"),
    (f"1\nsample_id={SID}\nH 0 zero 0\n", r"frame 0 \(line 3\): position is not a number"),
    (f"1\nsample_id={SID}\nH 0 0\n", r"frame 0 \(line 3\): expected 4 columns"),
    ("1\n=x\nH 0 0 0\n", r"frame 0 \(line 2\): unreadable comment line"),
    ("", r"no frames"),
])
def test_malformed_extxyz_names_file_and_frame(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.extxyz"
    path.write_text(body)
    with pytest.raises(C2NPInputError, match=r"bad\.extxyz: " + message):
        list(iter_forward_predictions(path))


def test_extxyz_extra_columns_blank_lines_and_nan(tmp_path: Path) -> None:
    part = Particle([19, 12, 1, 1], [[0, 0, 0], [1, 1, 1], [2, 0, 0], [0, 2.5, 0]])
    lines = [str(part.n_atoms), f'Properties=species:S:1:forces:R:3:pos:R:3 sample_id={SID} pbc="F F F"']
    syms = {19: "K", 12: "Mg", 1: "H"}
    lines += [f"{syms[int(z)]} 9 9 9 {x:.10f} {y:.10f} {w:.10f}"
              for z, (x, y, w) in zip(part.numbers, part.positions_angstrom)]
    lines[3] = lines[3].rsplit(" ", 1)[0] + " nan"
    path = tmp_path / "cols.extxyz"
    path.write_text("\n".join(lines) + "\n\n")
    ((place, got_id, z, x),) = list(iter_forward_predictions(path))
    assert got_id == SID and place == "frame 0 (line 1)" and np.array_equal(z, part.numbers)
    assert np.isnan(x[1, 2]) and np.allclose(x[2:], part.positions_angstrom[2:], atol=1e-9)
    with pytest.raises(C2NPInputError, match=r"cols\.extxyz: frame 0 \(line 1\): atom 1 has a non-finite"):
        list(iter_extxyz(path))  # a particle file (not predictions) refuses NaN


def test_one_parser_for_particles_and_plain_xyz(tmp_path: Path) -> None:
    part = Particle([19, 1], [[0, 0, 0], [1.5, 0, 0]])
    write_extxyz(tmp_path / "a.extxyz", [(part, {"sample_id": "x", "quaternion_xyzw": [0, 0, 0, 1]})])
    (_, got, info), = list(iter_extxyz(tmp_path / "a.extxyz"))
    assert info["sample_id"] == "x" and np.allclose(info["quaternion_xyzw"], [0, 0, 0, 1])
    assert np.allclose(got.positions_angstrom, part.positions_angstrom)
    plain = tmp_path / "plain.xyz"
    plain.write_text('2\nLattice="1 2" is not a cell\nK 0 0 0\nH 1.5 0 0\n')
    assert np.allclose(read_particle(plain).positions_angstrom, part.positions_angstrom)
    with pytest.raises(C2NPInputError, match="unreadable comment"):
        list(iter_xyz_frames(plain))  # strict by default: prediction files need key=value text


def test_malformed_h5(tmp_path: Path) -> None:
    import h5py

    path = write_forward_predictions_h5(tmp_path / "p.h5", _preds())
    with h5py.File(path, "r+") as f:
        f["numbers"][0] = 0
    with pytest.raises(C2NPInputError, match=r"p\.h5: sample 0 .*unknown element"):
        list(iter_forward_predictions(path))
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not hdf5")
    with pytest.raises(C2NPInputError, match="junk.h5: not a readable HDF5"):
        list(iter_forward_predictions(junk))
    with pytest.raises(C2NPInputError, match="unknown predictions format"):
        list(iter_forward_predictions(write_extxyz(tmp_path / "p.txt", [])))


def test_inverse_roundtrip_and_value_forms(tmp_path: Path) -> None:
    rec = InversePrediction(LatticeParameters(4.0, 4.1, 4.2, 90.0, 91.0, 92.0), 12)
    preds = {"a": rec, "b": rec.as_tuple(),
             "c": dict(zip(INVERSE_COLUMNS[1:], rec.as_tuple()))}
    back = read_inverse_predictions(write_inverse_predictions(tmp_path / "p.csv", preds))
    assert list(back) == ["a", "b", "c"]
    for row in back.values():
        assert np.array_equal(row.params, rec.parameters.as_array()) and row.spacegroup == 12
    assert inverse_values(rec)[1] == 12.0
    with pytest.raises(ValueError, match="7 values"):
        inverse_values((1, 2, 3))
    nan = write_inverse_predictions(tmp_path / "n.csv", {"x": (4, 4, 4, 90, 90, 90, float("nan"))})
    assert np.isnan(read_inverse_predictions(nan)["x"].spacegroup)
    # rows read back are written again unchanged (e.g. under other sample ids), NaN included
    again = write_inverse_predictions(tmp_path / "r.csv", {f"new-{k}": v for k, v in back.items()}
                                      | {"x": read_inverse_predictions(nan)["x"]})
    assert again.read_text().splitlines()[1:] == [
        line.replace(k, f"new-{k}", 1) for k, line in zip("abc", (tmp_path / "p.csv").read_text().splitlines()[1:])
    ] + nan.read_text().splitlines()[1:]


@pytest.mark.parametrize("text, message", [
    ("", "empty file"),
    ("sample_id,a,b,c,alpha,beta,gamma\n", r"line 1: missing column\(s\) \['spacegroup'\]"),
    (f"sample_id,a,b,c,alpha,beta,gamma,spacegroup\n{SID},4,4,4,90,90,90\n", r"line 2: expected 8 fields"),
    (f"sample_id,a,b,c,alpha,beta,gamma,spacegroup\n{SID},4,four,4,90,90,90,221\n",
     r"line 2: column 'b' is not a number"),
    (f"sample_id,a,b,c,alpha,beta,gamma,spacegroup\n{SID},4,4,4,90,90,90,221\n{SID},4,4,4,90,90,90,221\n",
     r"line 3: duplicate sample_id"),
    ("sample_id,a,a,b,c,alpha,beta,gamma,spacegroup\n", r"line 1: repeated column"),
])
def test_malformed_csv_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(C2NPInputError, match=r"bad\.csv: " + message):
        read_inverse_predictions(path)


def test_csv_empty_value_is_a_failure_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("sample_id,a,b,c,alpha,beta,gamma,spacegroup\nX/R6/rot_1,4,,4,90,90,90,nan\n")
    row = read_inverse_predictions(path)["X/R6/rot_1"]
    assert np.isnan(row.params[1]) and np.isnan(row.spacegroup)


# --- hostile prediction files ------------------------------------------------------------
def test_space_group_4_1_is_not_read_as_41(tmp_path: Path) -> None:
    p = tmp_path / "p.csv"
    p.write_text("sample_id,a,b,c,alpha,beta,gamma,spacegroup\ns,4,4,4,90,90,90,4_1\n")
    with pytest.raises(C2NPInputError, match="line 2: column 'spacegroup' is not a number: '4_1'"):
        read_inverse_predictions(p)


def test_unterminated_quote_names_the_line_it_starts_on(tmp_path: Path) -> None:
    p = tmp_path / "p.csv"
    p.write_text("sample_id,a,b,c,alpha,beta,gamma,spacegroup\ns1,4,4,4,90,90,90,221\n"
                 '"s2,4,4,4,90,90,90,221\ns3,4,4,4,90,90,90,221\ns4,4,4,4,90,90,90,221\n')
    with pytest.raises(C2NPInputError, match="line 3: a quoted field runs over 3 lines .an unterminated quote"):
        read_inverse_predictions(p)


def test_tiny_h5_declaring_300_million_atoms_is_refused(tmp_path: Path) -> None:
    import h5py

    from c2np.errors import C2NPLimitError
    from c2np.predictions import FORWARD_H5_FORMAT, iter_forward_predictions

    p = tmp_path / "p.h5"
    with h5py.File(p, "w") as f:
        f.attrs["format"] = FORWARD_H5_FORMAT
        f.create_dataset("sample_ids", data=np.array([b"a/R6/rot_0"]))
        f.create_dataset("offsets", data=np.array([0, 300_000_000]))
        f.create_dataset("numbers", shape=(300_000_000,), dtype="i2", chunks=(1 << 16,), compression="gzip")
        f.create_dataset("positions", shape=(300_000_000, 3), dtype="f4", chunks=(1 << 16, 3), compression="gzip")
    assert p.stat().st_size < 20_000
    with pytest.raises(C2NPLimitError, match="p.h5: /numbers declares 600,000,000 bytes"):
        list(iter_forward_predictions(p))
