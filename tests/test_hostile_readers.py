"""Hostile structured files, folders, terminals, limits and schedulers: each case ends in one
clear line naming the file (and field), within a few seconds and bounded memory."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from c2np import limits
from c2np.cli import build_app
from c2np.errors import C2NPEnvironmentError, C2NPInputError, C2NPLimitError
from c2np.evaluation.results import Results, content_sha256
from c2np.evaluation.shards import PartialResults
from c2np.fileio import output_folder, read_text_bounded, regular_file_in, write_text
from c2np.sharding import check_shard_set
from c2np.structured import MAX_DEPTH, parse_json, parse_yaml, read_json
from c2np.submissions import prediction_file, read_model_yml
from c2np.terminal import printable, shortened

runner = CliRunner()
FAST = settings(max_examples=40, deadline=None)


# --- the guarded reader ---------------------------------------------------------------------
@pytest.mark.parametrize("text, words", [
    ("[" * 100_000, "nested deeper"),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested deeper"),
    ("1" * 5000, "5,000 digits"),
    ('{"a": NaN}', "finite numbers only"),
    ('{"a": -Infinity}', "finite numbers only"),
    ('{"a": 1e400}', "not finite"),
    ('{"a": 1, "a": 2}', "given twice"),
    ('{"a": ', "JSON document is not valid JSON"),
])
def test_hostile_json_is_one_clear_error(text: str, words: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(C2NPInputError, match=words) as err:
        parse_json(text, source="part.json")
    assert str(err.value).startswith("part.json: ") and len(str(err.value)) < 300
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("text, words", [
    ("a: &x [1]\nb: *x\n", "line 2.*aliases"),
    ("a: " + "[" * 10_000, "nest"),
    ("a: " + "1" * 5000, "5,000 digits"),
    ("wall: .nan\n", "line 1.*not a finite number"),
    ("wall: -.inf\n", "not a finite number"),
    ("wall: 1.0e+400\n", "not a finite number"),
    ("date: 2026-02-30\n", "line 1.*not a valid date"),
    ("x: !!python/object/apply:os.system ['echo pwned']\n", "could not determine a constructor"),
])
def test_hostile_yaml_is_one_clear_error(text: str, words: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(C2NPInputError, match=words) as err:
        parse_yaml(text, source="model.yml")
    assert str(err.value).startswith("model.yml: ") and len(str(err.value)) < 400
    assert time.monotonic() - t0 < 5


def test_yaml_dates_become_text_and_json_types_only() -> None:
    assert parse_yaml("date: 2026-01-19\nn: 3\nx: 1.5\n", source="m") == {"date": "2026-01-19", "n": 3, "x": 1.5}


@FAST
@given(st.recursive(st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False,
                                                                                         allow_infinity=False)
                    | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
                    max_leaves=30))
def test_any_finite_json_document_reads_back_the_same(doc: object) -> None:
    assert parse_json(json.dumps(doc), source="x") == doc


@FAST
@given(st.text(max_size=200))
def test_any_text_is_a_document_or_one_input_error(text: str) -> None:
    for parse in (parse_json, parse_yaml):
        try:
            parse(text, source="f")
        except C2NPInputError as exc:
            assert str(exc).startswith("f: ") and "\n" not in str(exc)


def test_size_is_checked_before_parsing_and_special_files_are_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 600_000 + "1]")
    with limits.override(document_bytes=1_000_000), pytest.raises(C2NPLimitError, match="document_bytes"):
        read_json(big)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(C2NPInputError, match="not a regular file"):
        read_json(fifo)  # never opened: a FIFO without a writer would block
    assert time.monotonic() - t0 < 2
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    with pytest.raises(C2NPInputError, match="not a regular file"):
        read_json(zero)


def test_a_huge_text_limit_does_not_reserve_memory(tmp_path: Path) -> None:
    p = tmp_path / "small.csv"
    p.write_text("a,b\n")
    with limits.override(text_bytes=2**62):
        assert read_text_bounded(p) == "a,b\n"
    with pytest.raises(C2NPInputError, match="at most 2\\*\\*62"):
        limits.parse_overrides("text_bytes=1e300")


# --- model.yml --------------------------------------------------------------------------------
_MODEL = """schema: c2np.submission/1
model: {id: m, name: M, version: '1', family: f, category: analytic, authors: [a], license: MIT, repository: r}
training: {protocol: paper, store_fingerprint: 'FINGERPRINT'}
hardware: cpu
wall_time_seconds: {training: WALL, inference: 1}
c2np_version: '0.1'
date: DATE
tasks: [forward]
""".replace("FINGERPRINT", "0" * 64)


def _model_yml(tmp_path: Path, wall: str = "1", date: str = "2026-01-19", extra: str = "") -> Path:
    p = tmp_path / "m" / "model.yml"
    p.parent.mkdir(exist_ok=True)
    p.write_text(_MODEL.replace("WALL", wall).replace("DATE", date) + extra)
    return p


@pytest.mark.parametrize("wall, date, extra, place, words", [
    (".nan", "2026-01-19", "", "line 5", "not a finite number"),
    ("1", "2026-02-30", "", "line 7", "not a valid date"),
    ("1", "'2026-02-30'", "", "date", "not a valid date"),
    ("'ten'", "2026-01-19", "", "wall_time_seconds.training", "is not of type"),
    ("1", "2026-01-19", "rotations_per_material_radius: 0\n", "rotations_per_material_radius", "minimum"),
    ("1.0e+999", "2026-01-19", "", "line 5", "not a finite number"),
])
def test_model_yml_problems_name_the_file_and_field(tmp_path: Path, wall: str, date: str, extra: str,
                                                    place: str, words: str) -> None:
    p = _model_yml(tmp_path, wall, date, extra)
    _, problems = read_model_yml(p)
    assert any(pr.place == place and words in pr.message for pr in problems), problems


def test_model_yml_baseline_is_valid(tmp_path: Path) -> None:
    doc, problems = read_model_yml(_model_yml(tmp_path))
    assert problems == [] and doc is not None


def test_a_two_megabyte_field_is_shortened_in_the_message(tmp_path: Path) -> None:
    p = _model_yml(tmp_path, extra="")
    p.write_text(p.read_text().replace("hardware: cpu", "hardware: " + "x" * 200_000))
    with limits.override(yaml_bytes=1e7):
        _, problems = read_model_yml(p)
    assert problems and all(len(str(pr)) < 800 for pr in problems)
    p.write_text(p.read_text() + "pad: " + "y" * 2_000_000 + "\n")
    with pytest.raises(C2NPLimitError, match="yaml_bytes"):
        read_model_yml(p)


# --- partial results, merges and results files --------------------------------------------------
def _partial(index: int = 0, count: int = 2, n_rows: int = 4) -> dict:
    samples = [{"position": k, "sample_id": f"A/R6/rot_{k}", "material": "A", "radius_angstrom": 6, "split": "id",
                "scores": {"ok": True, "failure_reason": None, "values": {"f1": 1.0}, "details": {}}}
               for k in range(index, n_rows, count)]
    return {"schema": "c2np.partial-results/1",
            "run": {"task": "forward", "model": "m", "split": "id", "subset": "eval", "subset_definition": {},
                    "predictions": {}, "tolerances": {"f1_tolerances_angstrom": [0.5]}, "n_resamples": 10,
                    "seed": 0},
            "shard": {"index": index, "count": count}, "n_rows": n_rows, "sample_ids_sha256": "0" * 64,
            "dataset": {"protocol": "paper", "fingerprint": "f", "n_materials": 1}, "seconds": 1.0,
            "samples": samples}


def _write(tmp_path: Path, name: str, doc: object) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return p


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["shard"].update(index="0"), "shard.index: '0' is not an integer"),
    (lambda d: d["shard"].update(count=0), "shard.count: 0 is below the minimum 1"),
    (lambda d: d["run"].update(seed=-1), "run.seed: -1 is below the minimum 0"),
    (lambda d: d.update(seconds="NaN"), "seconds: 'NaN' is not a number"),
    (lambda d: d["samples"][0]["scores"].update(ok="yes"), "samples\\[0\\].scores.ok: 'yes' is not true or false"),
    (lambda d: d["samples"][0].update(sample_id="x" * 2_000_000), "samples\\[0\\].sample_id: 'x+ … x+' \\(2,000,002"),
])
def test_partial_results_fields_are_typed(tmp_path: Path, edit, words: str) -> None:
    doc = _partial()
    edit(doc)
    p = _write(tmp_path, "p.json", doc)
    with pytest.raises(C2NPInputError, match=words) as err:
        PartialResults.read(p)
    assert str(err.value).startswith(str(p)) and len(str(err.value)) < 400


def test_non_finite_and_overflowing_numbers_in_a_part(tmp_path: Path) -> None:
    text = json.dumps(_partial())
    for bad in ('"seconds": NaN', '"seconds": 1e999', '"seconds": ' + "9" * 5000):
        p = _write(tmp_path, "p.json", text.replace('"seconds": 1.0', bad))
        with pytest.raises(C2NPInputError, match="p.json: partial results file is not valid JSON"):
            PartialResults.read(p)


def test_a_part_claiming_ten_million_shards_gives_a_short_line(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.json", _partial(0, 2))
    big = _partial(0, 2)
    big["shard"]["count"] = 999_999
    b = _write(tmp_path, "b.json", big)
    with pytest.raises(C2NPInputError) as err:  # 10 million is beyond the schema's range
        check_shard_set([("x", {**_partial(0, 2), "shard": {"index": 0, "count": 10_000_000}})], keys=(), what="m")
    assert "shard.count" in str(err.value)
    t0 = time.monotonic()
    res = runner.invoke(build_app(), ["merge-results", str(b), "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 2 and len(res.output) < 500, res.output[:1000]
    assert "missing shard(s) 1/999999, 2/999999" in res.output.replace("\n", "")
    assert time.monotonic() - t0 < 10
    huge = _partial(0, 2)
    huge["shard"]["count"] = 10_000_000
    res = runner.invoke(build_app(), ["merge-results", str(_write(tmp_path, "c.json", huge)), "-o",
                                      str(tmp_path / "r.json")])
    assert res.exit_code == 2 and "c.json: shard.count: 10000000 is above the maximum" in res.output.replace("\n", "")
    assert len(res.output) < 400
    res = runner.invoke(build_app(), ["merge-results", str(a), str(b), "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 2 and "b.json" in res.output and "Traceback" not in res.output


def test_a_part_claiming_a_huge_row_count_allocates_nothing(tmp_path: Path) -> None:
    parts = []
    for i in (0, 1):
        d = _partial(i, 2)
        d["n_rows"] = 10**12
        parts.append(_write(tmp_path, f"p{i}.json", d))
    res = runner.invoke(build_app(), ["merge-results", *map(str, parts), "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 2 and "n_rows" in res.output, res.output


def _results_doc() -> dict:
    doc = {"schema": "c2np.results/3", "task": "forward", "model": "m", "category": "unstated", "priors": [],
           "protocol": "paper", "split": "id", "subset": "eval", "dataset": {"fingerprint": "f", "n_materials": 1},
           "n_samples": 1, "n_failed": 0, "failed_samples": [],
           "metrics": {"overall": {"f1": {"mean": 1.0, "ci95": [1.0, 1.0], "mean_successes": 1.0, "n": 1,
                                          "n_failed": 0}}}}
    doc["content_sha256"] = content_sha256(doc)
    return doc


@pytest.mark.parametrize("edit, words", [
    (lambda d: d.update(n_samples="1"), "n_samples: '1' is not an integer"),
    (lambda d: d["metrics"]["overall"]["f1"].update(ci95=[1.0]), "metrics.overall.f1.ci95: 1 item"),
    (lambda d: d.update(task="x" * 100_000), "task: 'x+ … x+' \\(100,002 characters\\) is not one of"),
    (lambda d: d.update(failed_samples=[{"sample_id": 3, "reason": "r"}]), "failed_samples\\[0\\].sample_id"),
])
def test_results_fields_are_typed_even_with_a_recomputed_hash(tmp_path: Path, edit, words: str) -> None:
    assert Results.read(_write(tmp_path, "ok.json", _results_doc())).n_samples == 1
    doc = _results_doc()
    edit(doc)
    del doc["content_sha256"]
    doc["content_sha256"] = content_sha256(doc)
    with pytest.raises(C2NPInputError, match=words):
        Results.read(_write(tmp_path, "r.json", doc))


def test_catalog_shard_record_materials_must_be_safe_names(tmp_path: Path) -> None:
    from c2np.catalog.build import SHARD_SCHEMA, merge_catalogs

    part = tmp_path / "part"
    part.mkdir()
    rec = {"schema": SHARD_SCHEMA, "shard": {"index": 0, "count": 1}, "run": {"potential": "p", "fmax": 0.05},
           "n_rows": 1, "materials": ["../../etc/passwd"]}
    (part / "catalog.shard.json").write_text(json.dumps(rec))
    with pytest.raises(C2NPInputError, match="materials\\[0\\]: '../../etc/passwd' does not match"):
        merge_catalogs([part], tmp_path / "out")


# --- folders handed to us ---------------------------------------------------------------------------
def test_submission_files_must_be_regular_files_inside_the_folder(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    (sub / "forward").mkdir(parents=True)
    secret = tmp_path / "secret.extxyz"
    secret.write_text("SECRET CONTENT\n")
    (sub / "forward" / "id.extxyz").symlink_to(secret)
    path, problems = prediction_file(sub, "forward", "id")
    assert path is None and "leads outside" in problems[0].message and "SECRET" not in str(problems[0])
    (sub / "forward" / "id.extxyz").unlink()
    os.mkfifo(sub / "forward" / "id.extxyz")
    t0 = time.monotonic()
    path, problems = prediction_file(sub, "forward", "id")
    assert path is None and "not a regular file" in problems[0].message and time.monotonic() - t0 < 2
    (sub / "forward" / "id.extxyz").unlink()
    inside = sub / "forward" / "real.extxyz"
    inside.write_text("x")
    (sub / "forward" / "id.extxyz").symlink_to(inside)  # a link that stays inside is a file like any
    assert prediction_file(sub, "forward", "id")[0] is not None
    (sub / "model.yml").symlink_to("/dev/zero")
    _, problems = read_model_yml(sub / "model.yml")
    assert "leads outside" in problems[0].message or "not a regular file" in problems[0].message
    (sub / "model.yml").unlink()
    os.mkfifo(sub / "model.yml")
    _, problems = read_model_yml(sub / "model.yml")
    assert "not a regular file" in problems[0].message
    with pytest.raises(C2NPInputError, match="leads outside"):
        regular_file_in(sub, secret)


# --- output through links -------------------------------------------------------------------
def test_no_write_through_a_link_below_an_output_folder(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    site = tmp_path / "site"
    site.mkdir()
    (site / "assets").symlink_to(elsewhere, target_is_directory=True)
    with output_folder(site), pytest.raises(C2NPInputError, match="assets: is a symbolic link inside the output"):
        write_text(site / "assets" / "app.js", "x")
    assert list(elsewhere.iterdir()) == []
    write_text(site / "assets" / "app.js", "x")  # outside a command's output folder: the user's own link
    (elsewhere / "app.js").unlink()


def test_every_command_guards_its_out_folder(tmp_path: Path) -> None:
    from c2np.cli._common import handle_errors

    @handle_errors
    def command(out: Path) -> None:
        write_text(out / "assets" / "deep" / "app.js", "x")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    site = tmp_path / "SITE"
    site.mkdir()
    (site / "assets").symlink_to(elsewhere, target_is_directory=True)
    import typer

    with pytest.raises(typer.Exit) as ex:
        command(out=site)
    assert ex.value.exit_code == 2
    assert list(elsewhere.iterdir()) == []


# --- terminals ----------------------------------------------------------------------------------
def test_names_reach_the_terminal_escaped() -> None:
    name = "evil\x1b[2J\nerror: forged line\x9b\udcff.json"
    shown = printable(name)
    assert "\x1b" not in shown and "\n" not in shown and "\x9b" not in shown and "\udcff" not in shown
    assert shown == "evil\\x1b[2J\\nerror: forged line\\x9b\\xff.json"
    shown.encode("utf-8")
    assert len(shortened("x" * 10**6)) < 120


def test_a_hostile_file_name_is_one_escaped_line_on_stderr(tmp_path: Path) -> None:
    bad = tmp_path / "evil\x1b[31m\nerror: forged.json"
    bad.write_text("{")
    res = runner.invoke(build_app(), ["merge-results", str(bad), "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 2
    assert "\x1b" not in res.output and "forged" in res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1, res.output


def test_a_non_utf8_path_never_raises_unicode_encode_error(tmp_path: Path) -> None:
    bad = os.fsdecode(os.fsencode(str(tmp_path)) + b"/pred\xff.json")
    res = runner.invoke(build_app(), ["merge-results", bad, "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 2 and "UnicodeEncodeError" not in res.output, res.output
    assert "pred\\xff.json" in res.output


# --- limits, seeds and schedulers -------------------------------------------------------------
@pytest.mark.parametrize("argv, words", [
    (["--limit", "workers=1e300", "merge-results", "x.json", "-o", "r.json"], "at most 2**62"),
    (["--limit", "text_bytes=inf", "merge-results", "x.json", "-o", "r.json"], "finite"),
    (["evaluate", "--store", "s.h5", "--task", "forward", "--split", "id", "--predictions", "p", "-o", "r.json",
      "--seed", "-1"], "--seed must be an integer 0 .. 2**63 - 1"),
    (["evaluate", "--store", "s.h5", "--task", "forward", "--split", "id", "--predictions", "p", "-o", "r.json",
      "--scheduler", "tcp://host:99999"], "port must be a number 1 .. 65535"),
    (["evaluate", "--store", "s.h5", "--task", "forward", "--split", "id", "--predictions", "p", "-o", "r.json",
      "--scheduler", "tcp://ho st:8786"], "expected tcp://HOST:PORT"),
    (["evaluate", "--store", "s.h5", "--task", "forward", "--split", "id", "--predictions", "p", "-o", "r.json",
      "--scheduler", "tcp://[zz::1]:8786"], "not an IPv6 address"),
    (["evaluate", "--store", "s.h5", "--task", "forward", "--split", "id", "--predictions", "p", "-o", "r.json",
      "--scheduler", "local:100000"], "workers"),
])
def test_bad_values_are_one_line_exit_2_at_once(tmp_path: Path, argv: list[str], words: str) -> None:
    os.chdir(tmp_path)
    t0 = time.monotonic()
    res = runner.invoke(build_app(), argv)
    assert res.exit_code == 2, res.output
    assert words in res.output.replace("\n", ""), res.output
    assert "Traceback" not in res.output and time.monotonic() - t0 < 5


def _server(answer: bytes | None) -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve() -> None:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        if answer is not None:
            conn.sendall(answer)
        time.sleep(30)
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, srv.getsockname()[1]


@pytest.mark.parametrize("answer, words", [
    (None, "no answer within"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n" + b"x" * 1000, "not a Dask scheduler"),
])
def test_a_server_that_is_not_a_scheduler_ends_in_seconds(answer: bytes | None, words: str) -> None:
    pytest.importorskip("distributed")
    from c2np.executor import make_executor

    srv, port = _server(answer)
    t0 = time.monotonic()
    try:
        with pytest.raises(C2NPEnvironmentError, match=words):
            make_executor(1, f"tcp://127.0.0.1:{port}")
    finally:
        srv.close()
    assert time.monotonic() - t0 < 10


def test_a_refused_connection_is_one_line() -> None:
    from c2np.executor import probe_scheduler

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    with pytest.raises(C2NPEnvironmentError, match="cannot connect"):
        probe_scheduler(f"tcp://127.0.0.1:{port}")
