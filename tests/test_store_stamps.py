"""Stamps of verified stores (``c2np.store.stamps``): a store re-carved and found intact once
is not re-carved by a later process with the same bytes and code; anything else is."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import pytest

from c2np.errors import C2NPStoreError
from c2np.store import DatasetStore, build_store, require_intact
from c2np.store import stamps as store_stamps
from c2np.store import verify as store_mod


@pytest.fixture
def built(tmp_path: Path, kmgh3, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("C2NP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("C2NP_NO_STORE_STAMPS", raising=False)
    return build_store([kmgh3], tmp_path / "ds.h5", radii_angstrom=[6, 7], progress=False)


def _new_process(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Forget this process's checks (as a new process would) and count the re-carves."""
    monkeypatch.setattr(store_mod, "_INTACT", set())
    calls: list[int] = []
    real = store_mod.verify_opened

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(store_mod, "verify_opened", counting)
    return calls


def test_a_stamp_saves_the_recarve_of_a_later_process(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _new_process(monkeypatch)
    require_intact(DatasetStore.open(built))
    assert len(calls) == 1
    stamps = list((Path(os.environ["C2NP_CACHE_DIR"]) / "verified").glob("*.json"))
    assert len(stamps) == 1 and stamps[0].stat().st_mode & 0o777 == 0o666 & ~_umask()
    calls = _new_process(monkeypatch)
    require_intact(DatasetStore.open(built))
    assert calls == []  # the stamp was used
    monkeypatch.setenv("C2NP_NO_STORE_STAMPS", "1")
    calls = _new_process(monkeypatch)
    require_intact(DatasetStore.open(built))
    assert len(calls) == 1  # stamps off: re-carved


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_changed_bytes_are_checked_afresh_and_refused(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _new_process(monkeypatch)
    require_intact(DatasetStore.open(built))
    st = built.stat()
    with h5py.File(built, "r+") as f:
        f["base/positions"][0, 0] += 1e-4
    os.utime(built, ns=(st.st_atime_ns, st.st_mtime_ns))  # the old modification time
    calls = _new_process(monkeypatch)
    with pytest.raises(C2NPStoreError, match="does not match its fingerprint.*positions differ"):
        require_intact(DatasetStore.open(built))
    assert len(calls) == 1


def test_a_damaged_or_foreign_stamp_counts_as_absent(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _new_process(monkeypatch)
    require_intact(DatasetStore.open(built))
    (stamp,) = (Path(os.environ["C2NP_CACHE_DIR"]) / "verified").glob("*.json")
    for text in ("{not json", f'{{"key": "{stamp.stem}", "fingerprint": "0000"}}', "[]"):
        stamp.write_text(text)
        calls = _new_process(monkeypatch)
        require_intact(DatasetStore.open(built))
        assert len(calls) == 1, text


def test_an_unwritable_cache_only_costs_a_recheck(built: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("C2NP_CACHE_DIR", str(blocker))
    for _ in range(2):
        calls = _new_process(monkeypatch)
        require_intact(DatasetStore.open(built))
        assert len(calls) == 1
    assert blocker.read_text() == "x"


def test_the_key_covers_fingerprint_files_and_code(monkeypatch: pytest.MonkeyPatch) -> None:
    k = store_stamps.store_key("fp", ["a", "b"])
    assert k != store_stamps.store_key("fq", ["a", "b"])
    assert k != store_stamps.store_key("fp", ["b", "a"])
    assert k != store_stamps.store_key("fp", ["a"])
    monkeypatch.setattr(store_stamps, "code_digest", lambda: "other code")
    assert k != store_stamps.store_key("fp", ["a", "b"])
