"""Sharded stores under hostile conditions: a damaged shard behind a manifest that vouches
for it, a rebuild that fails part-way, two builds of one store at once."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import c2np.store.shards as st
from c2np import hdf5_guard
from c2np.errors import C2NPInputError, C2NPLimitError
from c2np.fileio import file_sha256
from c2np.store import DatasetStore, build_store
from c2np.store.manifest import shard_file_name
from helpers import perovskite

DATA = Path(__file__).parent / "data"
SRC = Path(__file__).resolve().parents[1] / "src"
RADII = [6]


def _cells() -> list:
    return [perovskite(), perovskite(a=3.9, ids="NaMgH3", A=11)]


def test_a_damaged_shard_behind_a_rewritten_manifest_is_probed_not_crashed_on(tmp_path: Path) -> None:
    mp = build_store(_cells(), tmp_path / "ds.json", radii_angstrom=RADII, progress=False, shards=1)
    shard = tmp_path / shard_file_name("ds", 0, 1)
    shutil.copyfile(DATA / "damaged_store_crash.h5", shard)  # crashes libhdf5 when read unguarded
    doc = json.loads(mp.read_text())
    doc["shards"][0].update(bytes=shard.stat().st_size, sha256=file_sha256(shard))  # the attacker's manifest
    mp.write_text(json.dumps(doc))
    hdf5_guard.forget()
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(SRC)!r})
        from c2np.errors import C2NPStoreError
        from c2np.store import DatasetStore
        try:
            DatasetStore.open({str(mp)!r})
        except C2NPStoreError as exc:
            print("REFUSED", exc)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "REFUSED" in res.stdout and "not a readable HDF5 shard" in res.stdout, res.stdout


def test_a_rebuild_that_fails_mid_build_keeps_the_old_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mp = build_store(_cells(), tmp_path / "ds.json", radii_angstrom=RADII, progress=False, shards=2)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if not p.name.startswith(".")}
    fp = DatasetStore.open(mp).fingerprint
    original = st._write_shard

    def second_fails(state, job):  # the second shard trips a limit after the first is written
        if job.index == 1:
            raise C2NPLimitError("atoms_per_particle exceeded (test)")
        return original(state, job)

    monkeypatch.setattr(st, "_write_shard", second_fails)
    with pytest.raises(C2NPLimitError):
        build_store(_cells(), mp, radii_angstrom=[6, 8], progress=False, shards=2)
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if not p.name.startswith(".")}
    assert after == before  # nothing lost, nothing half-replaced
    assert not list(tmp_path.glob(".ds.json.*.tmp"))  # the staging folder is gone
    assert DatasetStore.open(mp).fingerprint == fp


def test_a_second_build_of_the_same_store_is_refused_while_one_runs(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    mp = tmp_path / "ds.json"
    original = st._write_shard
    seen: list[str] = []

    def nested(state, job):  # while the first build writes its shards, a second one starts
        if not seen:
            seen.append("x")
            with pytest.raises(C2NPInputError, match="another build is writing this store"):
                build_store(_cells(), mp, radii_angstrom=RADII, progress=False, shards=2)
        return original(state, job)

    monkeypatch.setattr(st, "_write_shard", nested)
    build_store(_cells(), mp, radii_angstrom=RADII, progress=False, shards=2)
    assert seen and DatasetStore.open(mp)
