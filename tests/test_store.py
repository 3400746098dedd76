import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from c2np.carving import carve
from c2np.cells import write_cif
from c2np.cli import build_app
from c2np.errors import C2NPInputError, C2NPStoreError
from c2np.formats import export_extxyz, export_original, import_original
from c2np.loaders import collate_particles, iter_arrays, iter_atoms, torch_dataset
from c2np.particle_io import iter_extxyz
from c2np.store import DatasetStore, build_store, verify_store

RADII = [6, 8, 10]


@pytest.fixture
def store_path(tmp_path: Path, kmgh3, zoo) -> Path:
    return build_store([kmgh3, zoo["hexagonal"]], tmp_path / "ds.h5", radii_angstrom=RADII, progress=False)


def test_roundtrip_matches_carve(store_path: Path, kmgh3) -> None:
    ds = DatasetStore.open(store_path)
    assert set(ds.cells) == {"KMgH3", "Mg"}
    assert len(ds) == 2 * (164 + 60 + 93)
    for row in [0, 5, 200, len(ds) - 1]:
        s = ds.sample(row)
        ref = carve(ds.cells[s.material], s.radius_angstrom, quaternion=s.quaternion).particle
        assert np.array_equal(s.particle.numbers, ref.numbers)
        assert np.abs(s.particle.positions_angstrom - ref.positions_angstrom).max() < 1e-5
        assert s.sample_id == f"{s.material}/R{s.radius_angstrom}/rot_{s.rotation_index}"
    rows = ds.rows_for_ids(["KMgH3/R6/rot_3"])
    assert ds.sample(int(rows[0])).rotation_index == 3


def test_fingerprint_is_reproducible(tmp_path: Path, store_path: Path, kmgh3, zoo) -> None:
    other = build_store([zoo["hexagonal"], kmgh3], tmp_path / "again.h5", radii_angstrom=RADII, progress=False)
    assert DatasetStore.open(other).fingerprint == DatasetStore.open(store_path).fingerprint
    changed = build_store([kmgh3], tmp_path / "one.h5", radii_angstrom=RADII, progress=False)
    assert DatasetStore.open(changed).fingerprint != DatasetStore.open(store_path).fingerprint


def test_verify_ok_and_detects_tampering(tmp_path: Path, store_path: Path) -> None:
    rep = verify_store(store_path)
    assert rep.ok and rep.recipes_match_protocol and rep.max_position_error_angstrom < 1e-5
    with h5py.File(store_path, "r+") as f:
        f["base/positions"][3, 0] += 0.01
    rep = verify_store(store_path)
    assert not rep.ok and any("positions differ" in p for p in rep.problems)


def test_truncated_and_incomplete_store(tmp_path: Path, store_path: Path) -> None:
    data = store_path.read_bytes()
    bad = tmp_path / "trunc.h5"
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(C2NPStoreError, match="trunc.h5"):
        DatasetStore.open(bad)
    with h5py.File(store_path, "r+") as f:
        del f.attrs["fingerprint"]
    with pytest.raises(C2NPStoreError, match="incomplete"):
        DatasetStore.open(store_path)


def test_interrupted_build_keeps_old_store(tmp_path: Path, kmgh3, monkeypatch) -> None:
    path = build_store([kmgh3], tmp_path / "keep.h5", radii_angstrom=[6], progress=False)
    before = path.read_bytes()
    import c2np.store.write as store_mod

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(store_mod, "fingerprint", boom)
    with pytest.raises(KeyboardInterrupt):
        build_store([kmgh3], path, radii_angstrom=[6, 7], progress=False)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["keep.h5"]  # no temp file left


def test_loaders(store_path: Path) -> None:
    ds = DatasetStore.open(store_path)
    first = next(iter_arrays(ds, "ood"))
    assert first[0].endswith("/R6/rot_0") and first[2].shape[1] == 3
    atoms = next(iter_atoms(ds, "id"))
    assert atoms.info["split"] == "id" and atoms.info["radius_angstrom"] == 10
    tds = torch_dataset(ds, "train")
    assert len(tds) == len(ds.rows("train"))
    batch = collate_particles([tds[0], tds[1]])
    assert batch["ptr"][-1] == len(batch["numbers"]) == len(batch["batch"])


def test_export_extxyz_and_original(tmp_path: Path, store_path: Path) -> None:
    ds = DatasetStore.open(store_path)
    paths = export_extxyz(ds, tmp_path / "x", splits=["ood"], progress=False)
    frames = list(iter_extxyz(paths[0]))
    assert len(frames) == len(ds.rows("ood"))
    _, part, info = frames[7]
    assert info["split"] == "ood" and info["sample_id"] == ds.recipes.sample_ids()[ds.rows("ood")[7]]
    out = export_original(ds, tmp_path / "orig", progress=False)
    assert (out / "cifs" / "KMgH3.cif").is_file()
    assert (out / "quaternions" / "Mg" / "R10" / "xyz" / "rot_92.xyz").is_file()
    with pytest.raises(Exception, match="already exists"):
        export_original(ds, out, progress=False)


def test_import_original(tmp_path: Path, kmgh3) -> None:
    root = tmp_path / "raw"
    write_cif(kmgh3, root / "cifs" / "KMgH3.cif")
    (root / "materials").mkdir()
    shift = 10 * kmgh3.lattice_angstrom.sum(axis=0)  # original supercell frame
    for r in (6, 7):
        p = carve(kmgh3, r).particle
        lines = [str(p.n_atoms), "original"] + [
            f"{s} {x:.6f} {y:.6f} {z:.6f}" for s, (x, y, z) in
            zip(p.to_ase().get_chemical_symbols()[::-1], p.positions_angstrom[::-1] + shift)]
        (root / "materials" / f"KMgH3_R{r}.xyz").write_text("\n".join(lines) + "\n")
    path = import_original(root, tmp_path / "imp.h5", progress=False)
    ds = DatasetStore.open(path)
    assert ds.source == "imported-original" and len(ds) == 2 * 164
    report = json.loads(ds.attrs["import_report"])
    assert all(r["matched_within_0.01A"] == 1.0 for r in report)
    assert verify_store(path).ok


runner = CliRunner()


def test_cli_build_info_verify(tmp_path: Path, kmgh3) -> None:
    cifs = tmp_path / "cifs"
    write_cif(kmgh3, cifs / "KMgH3.cif")
    out = tmp_path / "s.h5"
    app = build_app()
    r = runner.invoke(app, ["build", "--cifs", str(cifs), "--radii", "6,7", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n_samples"] == 2 * 164
    r = runner.invoke(app, ["info", str(out), "--recipes", "--json", "--split", "ood"])
    recs = json.loads(r.stdout)["recipes"]
    assert len(recs) == 328 and len(recs[1]["quaternion_xyzw"]) == 4
    assert runner.invoke(app, ["verify", str(out), "--json"]).exit_code == 0
    with h5py.File(out, "r+") as f:
        f["base/positions"][0, 0] += 0.5
    assert runner.invoke(app, ["verify", str(out)]).exit_code == 1


def test_cli_bad_input_exit_2(tmp_path: Path, kmgh3) -> None:
    app = build_app()
    bad = tmp_path / "bad.cif"
    bad.write_text("not a cif")
    r = runner.invoke(app, ["carve", str(bad), "--radius", "5", "-o", str(tmp_path / "p.extxyz")])
    assert r.exit_code == 2 and "bad.cif" in r.output
    good = write_cif(kmgh3, tmp_path / "KMgH3.cif")
    assert runner.invoke(app, ["carve", str(good), "--radius", "-1", "-o", str(tmp_path / "p.extxyz")]).exit_code == 2
    r = runner.invoke(app, ["carve", str(good), "--radius", "5", "--quat", "0", "0", "0", "2",
                            "-o", str(tmp_path / "p.extxyz")])
    assert r.exit_code == 2 and "unit quaternion" in r.output
    r = runner.invoke(app, ["carve", str(good), "--radius", "5", "--quat", "nan", "0", "0", "1",
                            "-o", str(tmp_path / "p.extxyz")])
    assert r.exit_code == 2
    trunc = tmp_path / "t.h5"
    trunc.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 50)
    assert runner.invoke(app, ["verify", str(trunc)]).exit_code == 2
    assert runner.invoke(app, ["build", "--cifs", str(tmp_path / "nope"), "-o", str(tmp_path / "x.h5")]).exit_code == 2
    cifs = tmp_path / "cifs"
    write_cif(kmgh3, cifs / "KMgH3.cif")
    r = runner.invoke(app, ["build", "--cifs", str(cifs), "--materials", "Nope", "-o", str(tmp_path / "x.h5")])
    assert r.exit_code == 2 and "Nope" in r.output


def test_cli_carve_writes_particle(tmp_path: Path, kmgh3) -> None:
    good = write_cif(kmgh3, tmp_path / "KMgH3.cif")
    out = tmp_path / "p.extxyz"
    r = runner.invoke(build_app(), ["carve", str(good), "--radius", "6", "-o", str(out), "--json"])
    assert r.exit_code == 0
    (_, part, info), = list(iter_extxyz(out))
    assert part.n_atoms == json.loads(r.stdout)["n_atoms"] == carve(kmgh3, 6).particle.n_atoms
    assert info["material"] == "KMgH3"


# --- hostile stores ---------------------------------------------------------------------
def _rename_material(path: Path, new: str) -> None:
    with h5py.File(path, "r+") as f:
        ids = [s.decode() for s in f["cells/material_ids"][()]]
        old = ids[0]
        ids[0] = new
        del f["cells/material_ids"]
        f["cells"].create_dataset("material_ids", data=np.array([i.encode() for i in ids], dtype="S"))
        mats = [new if m == old else m for m in json.loads(f["recipes"].attrs["materials"])]
        f["recipes"].attrs["materials"] = json.dumps(mats)


@pytest.mark.parametrize("evil", ["../../x", "/tmp/abs", "a\nb", ".hidden"])
def test_store_with_unsafe_material_id_is_refused_everywhere(tmp_path: Path, store_path: Path, evil: str) -> None:
    _rename_material(store_path, evil)
    with pytest.raises(C2NPStoreError, match="not a safe name"):
        DatasetStore.open(store_path)
    res = CliRunner().invoke(build_app(), ["export", str(store_path), "--format", "original",
                                           "-o", str(tmp_path / "exp")])
    assert res.exit_code == 2 and "not a safe name" in res.output
    res = CliRunner().invoke(build_app(), ["verify", str(store_path)])
    assert res.exit_code == 2
    assert not (tmp_path / "exp").exists() and not (tmp_path.parent / "x").exists()


def test_build_refuses_unsafe_ids(tmp_path: Path, kmgh3) -> None:
    with pytest.raises(C2NPStoreError, match="not a safe name"):
        build_store([kmgh3.with_id("../up")], tmp_path / "ds.h5", radii_angstrom=[6], progress=False)
    assert not (tmp_path / "ds.h5").exists()


def test_tiny_store_declaring_huge_arrays_is_refused_before_reading(tmp_path: Path, store_path: Path) -> None:
    from c2np.errors import C2NPLimitError

    with h5py.File(store_path, "r+") as f:
        del f["base/positions"]
        f["base"].create_dataset("positions", shape=(300_000_000, 3), dtype="f4", chunks=(1 << 16, 3),
                                 compression="gzip")  # nothing written: a few kB on disk
    assert store_path.stat().st_size < 1_000_000
    with pytest.raises(C2NPLimitError, match="/base/positions declares 3,600,000,000 bytes"):
        DatasetStore.open(store_path)


def test_verify_catches_margins_clip_flags_and_tiny_shifts(tmp_path: Path, store_path: Path) -> None:
    import shutil

    cases = {
        "shift": lambda f: f["base/positions"].__setitem__((5, 1), f["base/positions"][5, 1] + 2e-5),
        "margin": lambda f: f["base/boundary_margin"].__setitem__(0, f["base/boundary_margin"][0] + 1e-3),
        "clip": lambda f: f["base/paper_supercell_clips"].__setitem__(1, not f["base/paper_supercell_clips"][1]),
    }
    expected = {"shift": "positions differ", "margin": "boundary margin", "clip": "clip flag"}
    for name, tamper in cases.items():
        copy = tmp_path / f"{name}.h5"
        shutil.copy(store_path, copy)
        with h5py.File(copy, "r+") as f:
            tamper(f)
        rep = verify_store(copy)
        assert not rep.ok and any(expected[name] in p for p in rep.problems), (name, rep.problems)
        res = CliRunner().invoke(build_app(), ["verify", str(copy)])
        assert res.exit_code == 1


def test_require_intact_refuses_a_tampered_store(tmp_path: Path, store_path: Path) -> None:
    from c2np.store import require_intact

    require_intact(DatasetStore.open(store_path))
    with h5py.File(store_path, "r+") as f:
        f["base/positions"][0, 0] += 1e-4
    os.utime(store_path, ns=(0, 0))  # a new modification time: the cached check is not reused
    with pytest.raises(C2NPStoreError, match="does not match its fingerprint.*positions differ"):
        require_intact(DatasetStore.open(store_path))


def test_require_intact_with_workers(tmp_path: Path, store_path: Path) -> None:
    """The check's re-carve through two local processes gives the same verdicts."""
    import shutil

    from c2np.executor import LocalExecutor
    from c2np.store import require_intact

    copy = tmp_path / "copy.h5"
    shutil.copyfile(store_path, copy)
    with LocalExecutor(2) as ex:
        require_intact(DatasetStore.open(copy), executor=ex)
        with h5py.File(copy, "r+") as f:
            f["base/positions"][-1, 2] -= 1e-4
        os.utime(copy, ns=(0, 0))
        with pytest.raises(C2NPStoreError, match="does not match its fingerprint.*positions differ"):
            require_intact(DatasetStore.open(copy), executor=ex)


def _raw_archive(tmp_path: Path, kmgh3, lines_r6: list[str]) -> Path:
    root = tmp_path / "raw"
    write_cif(kmgh3, root / "cifs" / "KMgH3.cif")
    (root / "materials").mkdir()
    (root / "materials" / "KMgH3_R6.xyz").write_text("\n".join(lines_r6) + "\n")
    return root


@pytest.mark.parametrize("lines, match", [
    (["0", "empty"], "frame 0 has no atoms"),
    (["1", "", "X 0 0 0"], "line 3.: unknown element 'X'"),
    (["2", "", "K 0 0 0", "Mg 1e30 0 0"], "line 3: atom 5e\\+29 Å from the particle centre"),
    (["2", "", "K 0 0 0", "Mg 0 0 0.1"], "lines 3 and 4: atoms closer than 0.5 Å"),
    (["4_1", ""], "line 1.: expected an atom count, got '4_1'"),
    (["1", "", "K nan 0 0"], "frame 0 .line 1.: atom 0 has a non-finite position"),
])
def test_import_original_refuses_bad_particles(tmp_path: Path, kmgh3, lines: list[str], match: str) -> None:
    root = _raw_archive(tmp_path, kmgh3, lines)
    with pytest.raises(C2NPInputError, match=match):
        import_original(root, tmp_path / "imp.h5", progress=False)
    assert not (tmp_path / "imp.h5").exists()


def test_import_original_reads_upper_case_suffix(tmp_path: Path, kmgh3) -> None:
    p = carve(kmgh3, 6).particle
    lines = [str(p.n_atoms), ""] + [f"{s} {x:.6f} {y:.6f} {z:.6f}" for s, (x, y, z) in
                                    zip(p.to_ase().get_chemical_symbols(), p.positions_angstrom)]
    root = _raw_archive(tmp_path, kmgh3, lines)
    (root / "materials" / "KMgH3_R6.xyz").rename(root / "materials" / "KMgH3_R6.XYZ")
    assert len(DatasetStore.open(import_original(root, tmp_path / "imp.h5", progress=False))) == 164


@pytest.mark.parametrize("version", [float("inf"), 1.0, "1", -1])
def test_odd_format_versions_are_a_clear_error(store_path: Path, version: object) -> None:
    """Found by tests/test_fuzz_readers.py: an infinite format_version raised OverflowError."""
    with h5py.File(store_path, "r+") as f:
        f.attrs["format_version"] = version
    with pytest.raises(C2NPStoreError, match="format version"):
        DatasetStore.open(store_path)


def test_cli_carve_normalises_a_rounded_quaternion_and_refuses_a_wrong_one(tmp_path: Path, kmgh3) -> None:
    good = write_cif(kmgh3, tmp_path / "KMgH3.cif")
    h = "0.7071068"
    r = runner.invoke(build_app(), ["carve", str(good), "--radius", "6", "--quat", "0", "0", h, h,
                                    "-o", str(tmp_path / "a.extxyz"), "--json"])
    assert r.exit_code == 0, r.output
    want = carve(kmgh3, 6, quaternion=(0, 0, np.sqrt(0.5), np.sqrt(0.5))).particle.n_atoms
    assert json.loads(r.stdout)["n_atoms"] == want
    r = runner.invoke(build_app(), ["carve", str(good), "--radius", "6", "--quat", "0", "0", "0.7", "0.7",
                                    "-o", str(tmp_path / "b.extxyz")])
    assert r.exit_code == 2 and "not a unit quaternion" in r.output and "Traceback" not in r.output


def test_store_recipes_with_rounded_quaternions(tmp_path: Path, store_path: Path) -> None:
    with h5py.File(store_path, "r+") as f:
        q = f["recipes/quaternion"][()]
        q[3] *= 1 + 5e-7  # rounding: read back normalised
        f["recipes/quaternion"][...] = q
    rec = DatasetStore.open(store_path).recipes
    assert np.linalg.norm(rec.quaternion[3]) == pytest.approx(1.0, abs=1e-15)
    with h5py.File(store_path, "r+") as f:
        q = f["recipes/quaternion"][()]
        q[5] *= 1.01
        f["recipes/quaternion"][...] = q
    with pytest.raises(C2NPStoreError, match="row 5"):
        DatasetStore.open(store_path)
