"""Hostile model folders (a training run, a crystal generator, a generator pool) and partial
prediction records: each case ends in one clear line naming the file and the field, within a
few seconds and bounded memory, through the library and through the command line (exit 2)."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from c2np import limits
from c2np.cli import build_app
from c2np.errors import C2NPInputError, C2NPLimitError

torch = pytest.importorskip("torch")

PRETRAINED = Path(__file__).resolve().parents[1] / "pretrained"
runner = CliRunner()
Edit = Callable[[dict], object]


def _set(path: str, value: object) -> Edit:
    """An edit of a JSON document: ``path`` ``a.b.c`` set to ``value``."""
    def edit(doc: dict) -> None:
        *parents, last = path.split(".")
        for key in parents:
            doc = doc[key]
        doc[last] = value
    return edit


def _write_json(path: Path, doc: dict, edit: Edit | None = None, raw: str | None = None) -> None:
    if edit is not None:
        edit(doc)
    path.unlink()
    path.write_text(raw if raw is not None else json.dumps(doc))


@pytest.fixture()
def run_folder(tmp_path: Path) -> Path:
    """A copy of a shipped task-1 run folder (config.json, best/, log.csv, reference_fidelity.json)."""
    folder = tmp_path / "run"
    shutil.copytree(PRETRAINED / "mattergen-forward", folder)
    return folder


@pytest.fixture()
def gen_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "gen"
    shutil.copytree(PRETRAINED / "diffcsp-inverse", folder)
    return folder


def _one_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1, text[:2000]
    assert "Traceback" not in text and "unexpected" not in text and len(text) < 2500, text[:2000]
    return lines[0]


# --- run folder: config.json ------------------------------------------------------------------------------
RUN_CONFIG_CASES = [
    (None, "[" * 100_000, r"config.json: the run metadata is not valid JSON: nested deeper than 64"),
    (None, '{"model": "mattergen", "task": "forward", "config": {"hidden": ' + "9" * 5000 + "}}",
     "config.json: the run metadata is not valid JSON: an integer of 5,000 digits"),
    (_set("config.hidden", "64"), None, r"config.json: config.hidden: '64' is not an integer"),
    (_set("config.batch_size", 0), None, r"config.json: config.batch_size: 0 is below the minimum 1"),
    (_set("config.layers", -3), None, r"config.json: config.layers: -3 is below the minimum 0"),
    (None, '{"model": "mattergen", "task": "forward", "config": {"lr": 1e400}}', "not finite"),
    (None, '{"model": "mattergen", "task": "forward", "config": {"max_train_seconds": NaN}}', "finite numbers only"),
    (_set("model", "x" * 2_000_000), None, r"config.json: model: 'xxx.*\(2,000,002 characters\) is not one of"),
    (_set("config.hidden", 1_000_000), None,
     r"config.json: config: the network it declares: .* bytes exceeds the limit weights_bytes"),
    (_set("config.layers", 10**6), None,
     r"config.json: config.layers: 1,000,000 layers exceeds the limit model_layers"),
    (_set("config.sample_eps_t", 1.0), None, r"config.json: config.sample_eps_t: 1.0 must be < 1"),
    (_set("config.unknown", 1), None, r"config.json: config: unexpected key\(s\) 'unknown'"),
    (_set("task", "both"), None, r"config.json: task: 'both' is not one of"),
]


@pytest.mark.parametrize("edit, raw, words", RUN_CONFIG_CASES)
def test_hostile_run_config_is_one_clear_error(run_folder: Path, edit: Edit | None, raw: str | None,
                                               words: str) -> None:
    from c2np.models.training import load_run

    path = run_folder / "config.json"
    _write_json(path, json.loads(path.read_text()), edit, raw)
    t0 = time.monotonic()
    with pytest.raises(C2NPInputError, match=words) as err:
        load_run(run_folder)
    assert str(err.value).startswith(str(path)) and len(str(err.value)) < 600
    assert time.monotonic() - t0 < 10


def _special(path: Path, kind: str, tmp_path: Path) -> str:
    """Replace ``path`` by a FIFO, a link to /dev/zero or a link to a file outside its folder;
    the words of the expected error."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
        return "not a regular file"
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
        return "leads outside"
    secret = tmp_path / "secret.txt"
    secret.write_text('{"SECRET": "CONTENT"}')
    path.symlink_to(secret)
    return "leads outside"


@pytest.mark.parametrize("name", ["config.json", "best/state.json", "best/model.safetensors"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "outside"])
def test_special_files_in_a_run_folder_are_refused_before_opening(run_folder: Path, tmp_path: Path, name: str,
                                                                   kind: str) -> None:
    from c2np.models.training import load_run

    words = _special(run_folder / name, kind, tmp_path)
    t0 = time.monotonic()
    with pytest.raises(C2NPInputError, match=words) as err:
        load_run(run_folder)
    assert name.split("/")[-1] in str(err.value) and "SECRET" not in str(err.value)
    assert time.monotonic() - t0 < 10


def test_a_config_no_network_can_be_built_from_is_one_error() -> None:
    from c2np.models.runfiles import check_model_size

    with pytest.raises(C2NPInputError, match=r"^config.json: config: no network can be built from this config "
                                             r"\(ZeroDivisionError: integer division or modulo by zero\)$"):
        check_model_size(lambda: torch.nn.Linear(4, 4 // 0), source="config.json: config")


def test_a_link_that_stays_inside_the_run_folder_is_read(run_folder: Path) -> None:
    from c2np.models.training import load_run

    (run_folder / "config.copy.json").write_bytes((run_folder / "config.json").read_bytes())
    (run_folder / "config.json").unlink()
    (run_folder / "config.json").symlink_to("config.copy.json")
    assert load_run(run_folder)[1]["model"] == "mattergen"


@pytest.mark.parametrize("edit, words", [
    (_set("epoch", "2"), r"best/state.json: epoch: '2' is not an integer"),
    (_set("epoch", float("nan")), r"best/state.json: epoch: nan is not an integer"),
    (_set("step", -1), r"best/state.json: step: -1 is below the minimum 0"),
])
def test_hostile_checkpoint_state(run_folder: Path, edit: Edit, words: str) -> None:
    from c2np.models.training import load_run

    path = run_folder / "best" / "state.json"
    _write_json(path, json.loads(path.read_text()), edit)
    with pytest.raises(C2NPInputError, match=words):
        load_run(run_folder)


# --- safetensors headers ------------------------------------------------------------------------------------
def _safetensors(path: Path, header: dict, data_bytes: int) -> None:
    """A safetensors file with ``header`` and ``data_bytes`` of (sparse) data."""
    text = json.dumps(header).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)) + text)
        fh.truncate(8 + len(text) + data_bytes)


@pytest.mark.parametrize("header, data_bytes, words", [
    ({"w": {"dtype": "F32", "shape": [50_000, 50_000], "data_offsets": [0, 10**10]}}, 10**10,
     r"model.safetensors: header: 10,000,000,000 bytes exceeds the limit weights_bytes"),
    ({"w": {"dtype": "F32", "shape": [10**6, 10**6], "data_offsets": [0, 4 * 10**12]}}, 64,
     r"does not match its data offsets"),
    ({"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}}, 16, r"shape\[0\]: -1 is below the minimum 0"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "v": {"dtype": "X9", "shape": [1],
                                                                            "data_offsets": [16, 17]}}, 17,
     r"v.dtype: 'X9' is not one of"),
    ({"w": {"dtype": "F32", "shape": [int("9" * 30)], "data_offsets": [0, 16]}}, 16, "does not match"),
])
def test_hostile_safetensors_header_is_refused_before_reading(run_folder: Path, header: dict, data_bytes: int,
                                                              words: str) -> None:
    import resource

    from c2np.models.training import load_run

    _safetensors(run_folder / "best" / "model.safetensors", header, data_bytes)
    t0 = time.monotonic()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    with pytest.raises(C2NPInputError, match=words):
        load_run(run_folder)
    assert time.monotonic() - t0 < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 500_000  # no 10 GB read


def test_a_header_longer_than_the_file_is_refused(tmp_path: Path) -> None:
    from c2np.models.runfiles import check_weights_header

    p = tmp_path / "w.safetensors"
    p.write_bytes(struct.pack("<Q", 2**60) + b"{}")
    with pytest.raises(C2NPInputError, match="a header of 1,152,921,504,606,846,976 bytes"):
        check_weights_header(p)


def test_the_weights_limit_is_raisable(run_folder: Path) -> None:
    from c2np.models.training import load_run

    with limits.override(weights_bytes=1000), pytest.raises(C2NPLimitError, match="weights_bytes"):
        load_run(run_folder)
    with limits.override(weights_bytes=1e9):
        assert load_run(run_folder)[1]["task"] == "forward"


# --- log.csv and reference_fidelity.json (model-diagnostic) ----------------------------------------------
@pytest.mark.parametrize("write, words", [
    (lambda p: p.write_text("epoch,step,train_loss\n1,3,lots\n"), r"log.csv: line 2: train_loss: 'lots' is not"),
    (lambda p: p.write_text("epoch,step\n1.5,3\n"), r"log.csv: line 2: epoch: 1.5 is not a whole number"),
    (lambda p: p.write_text("epoch,step\nnan,3\n"), r"log.csv: line 2: epoch: nan is not a whole number"),
    (lambda p: p.write_text("epoch,step\n1," + "9" * 5000 + "\n"), r"log.csv: line 2: step: '9999.*is not a number"),
    (lambda p: os.mkfifo(p), "log.csv: training log is not a regular file"),
    (lambda p: p.symlink_to("/dev/zero"), "log.csv: training log leads outside"),
])
def test_hostile_training_log_through_the_cli(run_folder: Path, tmp_path: Path, write: Callable[[Path], object],
                                              words: str) -> None:
    (run_folder / "log.csv").unlink()
    write(run_folder / "log.csv")
    t0 = time.monotonic()
    res = runner.invoke(build_app(), ["model-diagnostic", str(run_folder), "-o", str(tmp_path / "diag")])
    assert res.exit_code == 2, res.output
    line = _one_line(res.output)
    assert line.startswith("error: ") and re.search(words, line), line
    assert time.monotonic() - t0 < 20


def test_hostile_reference_fidelity(run_folder: Path) -> None:
    from c2np.models.diagnostic import read_references

    (run_folder / "reference_fidelity.json").write_text('{"sample_ids": "x", "baselines": {}}')
    with pytest.raises(C2NPInputError, match=r"reference_fidelity.json: sample_ids: 'x' is not a list"):
        read_references(run_folder)


# --- generator and pool folders ------------------------------------------------------------------------------
GEN_CASES = [
    (_set("config.batch", 0), r"config.json: config.batch: 0 is below the minimum 1"),
    (_set("config.hidden", "64"), r"config.json: config.hidden: '64' is not an integer"),
    (_set("n_desc", 10**9), r"config.json: n_desc: 1000000000 is not the descriptor length of this version \(388\)"),
    (_set("n_desc", -1), r"config.json: n_desc: -1 is not the descriptor length"),
    (_set("config.hidden", 1_000_000),
     r"config.json: config: the network it declares: .* exceeds the limit weights_bytes"),
    (_set("config.layers", 5000), r"config.json: config.layers: 5,000 layers exceeds the limit model_layers"),
    (_set("config.spacegroups", [1, 999]), r"config.json: config.spacegroups\[1\]: 999 is above the maximum 230"),
    (_set("compositions", [[1, -2, 0]]), r"config.json: compositions\[0\]\[1\]: -2 is below the minimum 0"),
    (_set("kind", "c2np.something/1"), r"config.json: kind: 'c2np.something/1' is not a crystal generator"),
    (_set("config.process", "magic"), r"config.json: config.process: 'magic' is not one of"),
    (_set("config.sigma_min", 1e308 * 10), r"not finite|finite numbers only"),
]


@pytest.mark.parametrize("edit, words", GEN_CASES)
def test_hostile_generator_config_is_one_clear_error(gen_folder: Path, edit: Edit, words: str) -> None:
    from c2np.models.inverse.io import load_generator

    path = gen_folder / "config.json"
    _write_json(path, json.loads(path.read_text()), edit)
    t0 = time.monotonic()
    with pytest.raises(C2NPInputError, match=words) as err:
        load_generator(gen_folder)
    assert str(err.value).startswith(str(path)) and len(str(err.value)) < 600
    assert time.monotonic() - t0 < 10


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "templates.json"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "outside"])
def test_special_files_in_a_generator_folder(gen_folder: Path, tmp_path: Path, name: str, kind: str) -> None:
    from c2np.models.inverse.io import load_generator

    words = _special(gen_folder / name, kind, tmp_path)
    t0 = time.monotonic()
    with pytest.raises(C2NPInputError, match=words) as err:
        load_generator(gen_folder)
    assert name in str(err.value) and "SECRET" not in str(err.value)
    assert time.monotonic() - t0 < 10


def test_hostile_templates_file(gen_folder: Path) -> None:
    from c2np.models.inverse.io import load_generator

    (gen_folder / "templates.json").write_text('[{"spacegroup": 0}]')
    with pytest.raises(C2NPInputError, match=r"templates.json: \[0\]: lacks the key 'slots'"):
        load_generator(gen_folder)
    (gen_folder / "templates.json").write_text("[" * 100_000)
    with pytest.raises(C2NPInputError, match=r"templates.json: .*nested deeper"):
        load_generator(gen_folder)


@pytest.fixture(scope="module")
def pool_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding two generator folders ``d`` and ``f`` and the pool ``pool`` naming them."""
    from c2np.models.inverse.pool import PoolRule, save_pool

    base = tmp_path_factory.mktemp("pool")
    for name, src in (("d", "diffcsp-inverse"), ("f", "flowmm-inverse")):
        shutil.copytree(PRETRAINED / src, base / name)
    save_pool(base / "pool", [("d", base / "d"), ("f", base / "f")], PoolRule())
    return base


def _pool_copy(pool_base: Path, tmp_path: Path) -> Path:
    shutil.copytree(pool_base, tmp_path / "b")
    return tmp_path / "b" / "pool"


@pytest.mark.parametrize("raw, words", [
    ('{"kind": "c2np.generator_pool/2", "members": [], "rule": {"symmetric_margin": NaN}}',
     "finite numbers only"),
    ('{"kind": "c2np.generator_pool/2", "members": [], "rule": {"symmetric_margin": "0.1"}}',
     r"rule.symmetric_margin: '0.1' is not a number"),
    ('{"kind": "c2np.generator_pool/1", "members": ' + json.dumps([f"m{i}" for i in range(1000)])
     + ', "rule": {}}', r"members: 1,000 items; at most 64 allowed"),
    ('{"kind": "c2np.generator_pool/2", "rule": {}, '
     '"members": [{"name": "d", "path": "../d", "config": {"batch": 0}}]}',
     r"members\[0\].config.batch: 0 is below the minimum 1"),
    ('{"kind": "c2np.generator_pool/2", "rule": {}, "members": [{"name": "d", "path": "' + "x" * 10**6 + '"}]}',
     r"members\[0\].path: 'xxx.*\(1,000,002 characters\) is longer than 4096"),
    ("[" * 100_000, "nested deeper"),
])
def test_hostile_pool_file(pool_base: Path, tmp_path: Path, raw: str, words: str) -> None:
    from c2np.models.inverse.pool import load_inverse_generator

    folder = _pool_copy(pool_base, tmp_path)
    (folder / "pool.json").write_text(raw)
    with pytest.raises(C2NPInputError, match=words) as err:
        load_inverse_generator(folder)
    assert str(err.value).startswith(str(folder / "pool.json"))


def test_a_fifo_pool_file_is_refused(pool_base: Path, tmp_path: Path) -> None:
    from c2np.models.inverse.pool import load_inverse_generator

    folder = _pool_copy(pool_base, tmp_path)
    (folder / "pool.json").unlink()
    os.mkfifo(folder / "pool.json")
    t0 = time.monotonic()
    with pytest.raises(C2NPInputError, match="pool.json: generator pool is not a regular file"):
        load_inverse_generator(folder)
    assert time.monotonic() - t0 < 5


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from c2np.cells import write_cif
    from c2np.models.data import demo_cells

    folder = tmp_path_factory.mktemp("cells")
    cell = demo_cells()[0]
    write_cif(cell, folder / f"{cell.material_id}.cif")
    return folder


@pytest.mark.parametrize("target, edit, words", [
    ("run", _set("config.batch_size", 0), r"config.json: config.batch_size: 0 is below the minimum 1"),
    ("run", _set("config.hidden", 10**6), r"config.json: config: the network it declares"),
    ("gen", _set("config.batch", 0), r"config.json: config.batch: 0 is below the minimum 1"),
    ("gen", _set("n_desc", 10**12), r"config.json: n_desc: 1000000000000 is not the descriptor length"),
])
def test_predict_on_a_hostile_folder_is_one_line_exit_2(run_folder: Path, gen_folder: Path, cells: Path,
                                                        tmp_path: Path, target: str, edit: Edit, words: str) -> None:
    folder = run_folder if target == "run" else gen_folder
    path = folder / "config.json"
    _write_json(path, json.loads(path.read_text()), edit)
    res = runner.invoke(build_app(), ["predict", "--run", str(folder), "--cells", str(cells), "--radii", "6",
                                      "--split", "ood", "-o", str(tmp_path / "p.csv")])
    assert res.exit_code == 2, res.output
    line = _one_line(res.output)
    assert re.search(words, line), line
    assert not (tmp_path / "p.csv").exists()


def test_the_weights_limit_is_a_root_flag(run_folder: Path, cells: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.ENV_VAR, "")  # restored after the test: --limit writes it
    res = runner.invoke(build_app(), ["--limit", "weights_bytes=1000", "predict", "--run", str(run_folder),
                                      "--cells", str(cells), "--radii", "6", "--split", "ood", "-o",
                                      str(tmp_path / "p.csv")])
    assert res.exit_code == 2, res.output
    assert re.search(r"config.json: config: the network it declares: .* bytes exceeds the limit weights_bytes = 1,000;"
                     r" raise it with `c2np --limit weights_bytes=N", _one_line(res.output)), res.output


def test_predict_on_a_fifo_config_ends_at_once(run_folder: Path, cells: Path, tmp_path: Path) -> None:
    (run_folder / "config.json").unlink()
    os.mkfifo(run_folder / "config.json")
    t0 = time.monotonic()
    res = runner.invoke(build_app(), ["predict", "--run", str(run_folder), "--cells", str(cells), "--radii", "6",
                                      "--split", "ood", "-o", str(tmp_path / "p.csv")])
    assert res.exit_code == 2 and "not a regular file" in _one_line(res.output), res.output
    assert time.monotonic() - t0 < 30


# --- partial prediction records (merge-predictions) --------------------------------------------------------
def _parts(tmp_path: Path, count: int = 2, n_rows: int = 4) -> list[Path]:
    paths = []
    tmp_path = tmp_path / "parts"
    tmp_path.mkdir()
    for i in range(count):
        p = tmp_path / f"part{i}.csv"
        p.write_text("sample_id,a,b,c,alpha,beta,gamma,spacegroup\n")
        rec = {"schema": "c2np.partial-predictions/1",
               "run": {"run": "r", "model": "flowmm", "task": "inverse", "split": "ood", "subset": "eval",
                       "seed": 0, "batch": 1},
               "shard": {"index": i, "count": count}, "n_rows": n_rows, "sample_ids_sha256": "0" * 64,
               "positions": list(range(i, n_rows, count)), "seconds": 1.0}
        (tmp_path / f"part{i}.csv.json").write_text(json.dumps(rec))
        paths.append(p)
    return paths


_ALL_ROWS = _set("n_rows", 10**12)  # given to every part


@pytest.mark.parametrize("edit, raw, words", [
    (_set("shard.count", "2"), None, r"part0.csv.json: shard.count: '2' is not an integer"),
    (_ALL_ROWS, None, r"the parts hold 4 samples, but their run has n_rows = 1,000,000,000,000"),
    (_set("n_rows", -1), None, r"part0.csv.json: n_rows: -1 is below the minimum 0"),
    (_set("run.batch", 0), None, r"part0.csv.json: run.batch: 0 is below the minimum 1"),
    (_set("positions", "all"), None, r"part0.csv.json: positions: 'all' is not a list"),
    (None, '{"seconds": NaN}', "finite numbers only"),
    (None, '{"n_rows": ' + "9" * 5000 + "}", "5,000 digits"),
    (_set("shard", {"index": 0, "count": 10_000_000}), None, r"shard.count: 10000000 is above the maximum"),
])
def test_hostile_partial_predictions_record_through_the_cli(tmp_path: Path, edit: Edit | None, raw: str | None,
                                                            words: str) -> None:
    parts = _parts(tmp_path)
    for rec in [p.with_name(p.name + ".json") for p in parts][:2 if edit is _ALL_ROWS else 1]:
        _write_json(rec, json.loads(rec.read_text()), edit, raw)
    t0 = time.monotonic()
    res = runner.invoke(build_app(), ["merge-predictions", *map(str, parts), "-o", str(tmp_path / "m.csv")])
    assert res.exit_code == 2, res.output
    assert re.search(words, _one_line(res.output)), res.output
    assert time.monotonic() - t0 < 10 and not (tmp_path / "m.csv").exists()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "outside"])
def test_special_part_files_are_refused(tmp_path: Path, kind: str) -> None:
    from c2np.models.training import merge_predictions

    parts = _parts(tmp_path)
    words = _special(parts[1], kind, tmp_path)
    with pytest.raises(C2NPInputError, match=words) as err:
        merge_predictions(parts, tmp_path / "m.csv")
    assert "part1.csv" in str(err.value)


# --- any JSON where a model folder's config.json belongs -----------------------------------------------------
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**45, 10**45) | st.floats() | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=12), kids, max_size=3),
                     max_leaves=12)
_FIELDS = st.sampled_from(["hidden", "layers", "heads", "batch_size", "knn", "latent_dim", "lr", "max_atoms",
                           "sample_steps", "name", "lr_schedule", "ema_decay", "sample_time_power"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=_FIELDS, value=_JSON)
def test_any_value_in_a_run_config_loads_or_is_one_input_error(run_folder: Path, field: str, value: object) -> None:
    from c2np.models.training import read_run_meta

    path = run_folder / "config.json"
    doc = json.loads((PRETRAINED / "mattergen-forward" / "config.json").read_text())
    doc["config"][field] = value
    path.write_text(json.dumps(doc))
    try:
        read_run_meta(run_folder)
    except C2NPInputError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc) and len(str(exc)) < 700


# --- resuming a run (train --resume) ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, object]:
    from c2np.models.config import get_config
    from c2np.models.data import InMemoryDataset, demo_cells
    from c2np.models.training import train

    torch.set_num_threads(1)
    ds = InMemoryDataset([demo_cells()[0]], "paper", radii_angstrom=[6, 8])
    tiny = get_config("tiny")
    cfg = tiny.__class__(**{**tiny.to_dict(), "steps_per_epoch": 2, "n_val": 2, "epochs": 1})
    folder = tmp_path_factory.mktemp("trained") / "r"
    train(ds, "sitescore", "inverse", cfg, folder, seed=0, progress=False)
    return folder, ds, cfg


def _state(edit: Edit) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        path = run / "checkpoint" / "state.json"
        _write_json(path, json.loads(path.read_text()), edit)
    return damage


def _fifo(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / name).unlink()
        os.mkfifo(run / name)
    return damage


@pytest.mark.parametrize("damage, words", [
    (_fifo("log.csv"), "log.csv: training log is not a regular file"),
    (_fifo("checkpoint/optim.pt"), "optim.pt: optimizer state is not a regular file"),
    (_fifo("checkpoint/state.json"), "state.json: training state is not a regular file"),
    (_state(_set("numpy_rng.bit_generator", "MT19937")),
     r"state.json: numpy_rng.bit_generator: 'MT19937' must be 'PCG64'"),
    (_state(_set("numpy_rng.state.state", -1)), r"state.json: numpy_rng.state.state: -1 is below the minimum 0"),
    (_state(_set("ema_updates", "many")), r"state.json: ema_updates: 'many' is not an integer"),
    (_state(_set("epoch", 10**30)), r"state.json: epoch: 1000000000000000000000000000000 is above the maximum"),
])
def test_hostile_files_when_resuming(trained: tuple, tmp_path: Path, damage: Callable[[Path], None],
                                     words: str) -> None:
    from c2np.models.training import train

    folder = tmp_path / "copy"
    shutil.copytree(trained[0], folder)
    damage(folder)
    t0 = time.monotonic()
    with pytest.raises(C2NPInputError, match=words):
        train(trained[1], "sitescore", "inverse", trained[2], folder, progress=False, resume=True, epochs=2)
    assert time.monotonic() - t0 < 20


def test_an_optimizer_file_beyond_the_weights_limit(trained: tuple, tmp_path: Path) -> None:
    from c2np.models.runfiles import check_weights_header
    from c2np.models.training import train

    folder = tmp_path / "copy"
    shutil.copytree(trained[0], folder)
    weights = check_weights_header(folder / "checkpoint" / "model.safetensors")
    assert (folder / "checkpoint" / "optim.pt").stat().st_size > 2 * weights  # Adam: two moments per weight
    with limits.override(weights_bytes=weights + 100), \
            pytest.raises(C2NPLimitError, match="optim.pt: .* exceeds the limit weights_bytes"):
        train(trained[1], "sitescore", "inverse", trained[2], folder, progress=False, resume=True, epochs=2)


# --- other JSON read by c2np: catalog documents, store manifests, verification stamps -------------------
def test_deep_nesting_in_other_json_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    from c2np.catalog.records import parse_catalog_document
    from c2np.store.manifest import _schema_of

    with pytest.raises(C2NPInputError, match="cat.json: catalog file is not valid JSON: nested deeper"):
        parse_catalog_document("[" * 100_000, source="cat.json")
    deep = tmp_path / "store.json"
    deep.write_text("[" * 100_000)
    assert _schema_of(deep) is None
