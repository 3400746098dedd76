"""HDF5 files from outside are read first by a throw-away process (c2np.hdf5_guard): a file
whose damage crashes the HDF5 library, or makes it loop, is one clear error, not a crash or a
hang of the caller. The two damaged stores in tests/data were found by flipping bytes of a
store (the crash also by tests/test_fuzz_readers.py; the loop is what held a CI run until its
90-minute limit)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from c2np import hdf5_guard
from c2np.errors import C2NPInputError, C2NPStoreError

DATA = Path(__file__).parent / "data"


def _crashes_here(path: Path, timeout_s: float) -> str:
    """What a plain h5py walk of ``path`` does in a child: 'ok', 'error', 'crash' or 'hang'."""
    try:
        res = subprocess.run([sys.executable, "-c", hdf5_guard._PROBE, str(path), str(4 << 30), str(1 << 20)],
                             capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return "hang"
    return {0: "ok", 3: "error"}.get(res.returncode, "crash" if res.returncode < 0 else "error")


def test_a_store_that_crashes_hdf5_is_a_clean_error() -> None:
    from c2np.store import DatasetStore

    path = DATA / "damaged_store_crash.h5"
    hdf5_guard.forget()
    with pytest.raises(C2NPStoreError, match="damaged_store_crash.h5: not a readable HDF5 store"):
        DatasetStore.open(path)
    # the file does crash the library where it is read unguarded (with this h5py)
    assert _crashes_here(path, 60) in ("crash", "error")


def test_a_store_that_makes_hdf5_loop_is_a_clean_error_within_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from c2np.store import DatasetStore

    monkeypatch.setattr(hdf5_guard, "probe_timeout_s", lambda size: 8.0)
    hdf5_guard.forget()
    t0 = time.monotonic()
    with pytest.raises(C2NPStoreError, match="damaged_store_hang.h5: not a readable HDF5 store") as err:
        DatasetStore.open(DATA / "damaged_store_hang.h5")
    assert time.monotonic() - t0 < 30
    assert "did not end within" in str(err.value) or "crashed" in str(err.value) or "Error" in str(err.value)


@pytest.mark.parametrize(("probe", "want"), [
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "crashed reading it"),
    ("import time; time.sleep(60)", "did not end within 2 s"),
    ("import sys; print('OSError: bad object header'); sys.exit(3)", "OSError: bad object header"),
    ("import sys; sys.exit(7)", "exited with code 7"),
])
def test_every_way_the_child_can_fail_names_the_file(probe: str, want: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "x.h5"
    f.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(100))
    monkeypatch.setattr(hdf5_guard, "_PROBE", probe)
    monkeypatch.setattr(hdf5_guard, "probe_timeout_s", lambda size: 2.0)
    with pytest.raises(C2NPInputError, match=f"x.h5: not a readable HDF5 file .*{want}"):
        hdf5_guard.check_hdf5_readable(f)


def test_a_good_file_is_probed_once_until_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import h5py
    import numpy as np

    f = tmp_path / "good.h5"
    with h5py.File(f, "w") as h:
        h.attrs["a"] = "x"
        h["g/d"] = np.arange(300_000, dtype=np.float64).reshape(-1, 3)
    monkeypatch.setattr(hdf5_guard, "SLICE_BYTES", 4096)     # many slices
    hdf5_guard.forget()
    calls: list[int] = []
    real = subprocess.run

    def counting(*a, **k):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(subprocess, "run", counting)
    hdf5_guard.check_hdf5_readable(f)
    hdf5_guard.check_hdf5_readable(f)
    assert len(calls) == 1
    with h5py.File(f, "a") as h:
        h.attrs["b"] = 1
    hdf5_guard.check_hdf5_readable(f)
    assert len(calls) == 2
    with pytest.raises(C2NPInputError, match="missing.h5: cannot read"):
        hdf5_guard.check_hdf5_readable(tmp_path / "missing.h5")


def test_cli_on_a_store_that_crashes_hdf5_exits_2_with_one_line() -> None:
    from typer.testing import CliRunner

    from c2np.cli import build_app

    hdf5_guard.forget()
    res = CliRunner().invoke(build_app(), ["verify", str(DATA / "damaged_store_crash.h5")])
    assert res.exit_code == 2, res.output
    assert "damaged_store_crash.h5: not a readable HDF5 store" in res.output
    assert "Traceback" not in res.output
