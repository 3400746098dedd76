"""Tests of the CLI's shared error handling (c2np.cli._common): one line, the right exit
code, user text printed literally, never a traceback."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from c2np.cli import build_app
from c2np.cli._common import handle_errors, os_error_message, print_json
from c2np.errors import C2NPInputError, C2NPNoAnswerError

runner = CliRunner()


@pytest.mark.parametrize("name", ["[bold]x[/bold].cif", "a:smile:b.cif", "[red]", "x[/].cif"])
def test_markup_in_paths_is_printed_literally(tmp_path: Path, name: str) -> None:
    missing = tmp_path / name
    res = runner.invoke(build_app(), ["carve", str(missing), "-r", "6", "-o", str(tmp_path / "o.extxyz")])
    assert res.exit_code == 2
    assert name in res.output and "Traceback" not in res.output


def _run(exc: BaseException) -> tuple[int, str]:
    app = typer.Typer()

    @app.command()
    @handle_errors
    def boom() -> None:
        raise exc

    res = runner.invoke(app, [])
    return res.exit_code, res.output


@pytest.mark.parametrize("exc, code, text", [
    (C2NPInputError("bad [input]"), 2, "bad [input]"),
    (C2NPNoAnswerError("no lattice found"), 1, "no lattice found"),
    (OSError(errno.ENOSPC, "No space left on device", "out.h5"), 2, "out.h5: No space left on device"),
    (OSError(errno.EROFS, "Read-only file system", "/ro/x"), 2, "/ro/x: Read-only file system"),
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "file/x"), 2, "a part of the path is a file"),
    (MemoryError(), 2, "out of memory"),
    (ZeroDivisionError("division by zero"), 2, "unexpected ZeroDivisionError: division by zero"),
    (ModuleNotFoundError("No module named 'safetensors'", name="safetensors"), 2,
     "needs the optional package 'safetensors': pip install torch==2.13.0 && pip install 'c2np[torch]'"),
    (ModuleNotFoundError("No module named 'dask.distributed'", name="dask.distributed"), 2, "c2np[dask]"),
    (ModuleNotFoundError("No module named 'h5py'", name="h5py"), 2, "the installation is incomplete"),
])
def test_every_error_is_one_line_with_its_exit_code(exc: BaseException, code: int, text: str) -> None:
    got, out = _run(exc)
    assert got == code and text in out and "Traceback" not in out


def test_os_error_message_names_both_paths() -> None:
    msg = os_error_message(OSError(errno.EXDEV, "Invalid cross-device link", "a.tmp", None, "b.h5"))
    assert msg.startswith("a.tmp -> b.h5: Invalid cross-device link")


def test_json_output_never_holds_non_finite_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np

    print_json({"x": float("nan"), "y": [1.0, float("inf")], "z": np.float64(-np.inf), "a": np.array([np.nan])})
    assert json.loads(capsys.readouterr().out) == {"x": None, "y": [1.0, None], "z": None, "a": [None]}


def test_identify_exit_codes_and_messages(tmp_path: Path) -> None:
    from c2np.carving import carve
    from helpers import perovskite

    p = carve(perovskite(), 8).particle
    symbols = p.to_ase().get_chemical_symbols()

    def write(name: str, scale: float) -> Path:
        path = tmp_path / name
        path.write_text(f"{p.n_atoms}\n\n" + "".join(f"{s} {x * scale} {y * scale} {z * scale}\n"
                                                  for s, (x, y, z) in zip(symbols, p.positions_angstrom)))
        return path

    res = runner.invoke(build_app(), ["identify", str(write("huge.xyz", 1e8))])
    assert res.exit_code == 2 and "positions must be in Å" in res.output
    flat = tmp_path / "flat.xyz"
    flat.write_text("9\n\n" + "".join(f"K {i} {j} 0\n" for i in range(3) for j in range(3)))
    res = runner.invoke(build_app(), ["identify", str(flat)])
    assert res.exit_code == 1, res.output  # a readable particle that holds no 3D lattice


def test_benchmark_refuses_unknown_tasks_and_splits(tmp_path: Path) -> None:
    for args, text in ((["--tasks", "bogus"], "unknown task"), (["--splits", "nope"], "unknown split"),
                       (["--subset", "half"], "unknown subset")):
        res = runner.invoke(build_app(), ["benchmark", "--store", str(tmp_path / "none.h5"),
                                          "-o", str(tmp_path / "b"), *args])
        assert res.exit_code == 2 and text in res.output, res.output
        assert not (tmp_path / "b").exists()


def test_emoji_codes_in_user_text_are_not_replaced(tmp_path: Path) -> None:
    from c2np.catalog import catalog_data_dir

    cif = tmp_path / "KMgH3.cif"
    cif.write_text((catalog_data_dir() / "KMgH3.cif").read_text())
    out = tmp_path / "a:x:[b].extxyz"
    res = runner.invoke(build_app(), ["carve", str(cif), "-r", "6", "-o", str(out)])
    assert res.exit_code == 0 and str(out) in res.output and "❌" not in res.output
