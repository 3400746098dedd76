"""Submissions: model.yml schema, `c2np submission check` (every problem named, exit 2),
and `c2np leaderboard` (scores submission folders only and builds the site)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from c2np.cli import build_app
from c2np.submissions import check_submission, read_model_yml
from conftest import crystal_zoo, perovskite


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    """Baseline submissions (and their leaderboard) on a two-material store."""
    from c2np.benchmark import run_benchmark
    from c2np.store import build_store

    root = tmp_path_factory.mktemp("subs")
    store = build_store([perovskite(), crystal_zoo()["hexagonal"]], root / "ds.h5",
                        radii_angstrom=[6, 8, 10], progress=False)
    run_benchmark(store, root / "bench", n_resamples=20, progress=False)
    return root


@pytest.fixture
def store(bench: Path):
    from c2np.store import DatasetStore

    return DatasetStore.open(bench / "ds.h5")


def _copy(bench: Path, name: str, tmp_path: Path, new_id: str | None = None) -> Path:
    dst = tmp_path / (new_id or name)
    shutil.copytree(bench / "bench" / "submissions" / name, dst)
    if new_id:
        doc = yaml.safe_load((dst / "model.yml").read_text())
        doc["model"]["id"] = new_id
        (dst / "model.yml").write_text(yaml.safe_dump(doc))
    return dst


def _edit(folder: Path, **changes) -> None:
    doc = yaml.safe_load((folder / "model.yml").read_text())
    for key, value in changes.items():
        node = doc
        *parents, last = key.split(".")
        for k in parents:
            node = node[k]
        if value is None:
            del node[last]
        else:
            node[last] = value
    (folder / "model.yml").write_text(yaml.safe_dump(doc))


def _messages(problems) -> str:
    return "\n".join(str(p) for p in problems)


def test_the_baselines_are_valid_submissions(bench: Path, store) -> None:
    subs = sorted(p.name for p in (bench / "bench" / "submissions").iterdir())
    assert subs == sorted(["analytic-carve", "memorisation", "random-ball", "solver", "composition-lookup",
                           "majority-class"])
    for name in subs:
        doc, problems = check_submission(bench / "bench" / "submissions" / name, store)
        assert problems == [], _messages(problems)
        assert doc["training"]["store_fingerprint"] == store.fingerprint


@pytest.mark.parametrize("change, place, text", [
    ({"model.category": "neural"}, "model.category", "is not one of"),
    ({"model.category": None}, "model", "'category' is a required property"),
    ({"model.category": "learned", "model.priors": ["magic"]}, "model.priors[0]", "is not one of"),
    ({"model.category": "learned+prior"}, "model.priors", "needs the list of its priors"),
    ({"model.category": "learned", "model.priors": ["lattice-sites"]}, "model.priors", "takes no priors"),
    ({"model.kind": "learned"}, "model", "Additional properties are not allowed ('kind'"),
    ({"model.license": None}, "model", "'license' is a required property"),
    ({"model.repository": None}, "model", "is not valid under any of the given schemas"),
    ({"model.doi": "not-a-doi"}, "model.doi", "does not match"),
    ({"licence": "MIT"}, "(top level)", "Additional properties are not allowed ('licence'"),
    ({"wall_time_seconds.training": -1}, "wall_time_seconds.training", "less than the minimum"),
    ({"date": "19.01.2026"}, "date", "does not match"),
    ({"tasks": []}, "tasks", "should be non-empty"),
    ({"schema": "c2np.submission/0"}, "schema", "was expected"),
    ({"model.orcids": ["0000-0002-1825-009"]}, "model.orcids[0]", "does not match"),
    ({"model.orcids": ["0000-0002-1825-0098"]}, "model.orcids[0]", "check digit"),
    ({"model.parameter_count": 1.5}, "model.parameter_count", "is not of type 'integer'"),
    ({"model.checkpoint": {"url": "ftp://host/a.ckpt", "sha256": "0" * 64}}, "model.checkpoint.url",
     "does not match"),
    ({"model.checkpoint": {"url": "https://host/a.ckpt"}}, "model.checkpoint", "'sha256' is a required property"),
    ({"compute": {"gpu_hours": {"training": -2}}}, "compute.gpu_hours.training", "less than the minimum"),
    ({"compute": {"gpu_count": "one"}}, "compute.gpu_count", "is not of type 'integer'"),
    ({"packages": {"torch": 2.13}}, "packages.torch", "is not of type 'string'"),
    ({"packages": {"bad name!": "1.0"}}, "packages", "does not match"),
])
def test_schema_problems_are_named_with_their_place(bench: Path, tmp_path: Path, store, change, place,
                                                     text) -> None:
    f = _copy(bench, "random-ball", tmp_path)
    _edit(f, **change)
    _, problems = check_submission(f, store)
    assert any(p.place == place and text in p.message for p in problems), _messages(problems)


def test_optional_metadata_validates(bench: Path, tmp_path: Path, store) -> None:
    f = _copy(bench, "random-ball", tmp_path)
    _edit(f, **{"model.orcids": ["0000-0002-1825-0097", "https://orcid.org/0000-0002-1694-233X"],
                "model.parameter_count": 1234567,
                "model.checkpoint": {"url": "https://example.org/ckpt/model.pt", "sha256": "ab" * 32},
                "compute": {"gpu_type": "NVIDIA H100 80GB", "gpu_count": 1,
                            "gpu_hours": {"training": 12.5, "inference": 0.25}},
                "packages": {"torch": "2.13.0", "torch_geometric": "2.8.1", "c2np": "0.1.0"}})
    _, problems = check_submission(f, store)
    assert problems == [], _messages(problems)


def test_the_shipped_json_schema_is_model_schema(tmp_path: Path) -> None:
    from c2np.submissions import MODEL_SCHEMA, model_schema_text, packaged_model_schema

    shipped = packaged_model_schema()
    assert json.loads(shipped) == MODEL_SCHEMA
    assert shipped == model_schema_text(), (
        "regenerate: python -c \"from c2np.submissions import model_schema_text; "
        "print(model_schema_text(), end='')\" > src/c2np/data/model.schema.json")
    res = CliRunner().invoke(build_app(), ["submission", "schema"])
    assert res.exit_code == 0 and json.loads(res.stdout) == MODEL_SCHEMA
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(json.loads(res.stdout))


def test_yaml_is_read_safely(tmp_path: Path) -> None:
    p = tmp_path / "model.yml"
    p.write_text("schema: !!python/object/apply:os.system ['echo pwned']\n")
    doc, problems = read_model_yml(p)
    assert doc is None and problems and "not YAML" in problems[0].message
    p.write_text("model: [unclosed\n")
    doc, problems = read_model_yml(p)
    assert doc is None and problems[0].place.startswith("line ")
    p.write_text("- a list\n")
    assert "mapping" in read_model_yml(p)[1][0].message
    p.write_text("date: 2026-01-19\n")  # a YAML date is read as its ISO string
    doc, problems = read_model_yml(p)
    assert doc["date"] == "2026-01-19" and not any(q.place == "date" for q in problems)


def test_identity_fingerprint_and_protocol_are_checked(bench: Path, tmp_path: Path, store) -> None:
    f = _copy(bench, "random-ball", tmp_path)
    _edit(f, **{"model.id": "other-name", "training.store_fingerprint": "0" * 64, "training.protocol": "strict"})
    _, problems = check_submission(f, store)
    places = {p.place for p in problems}
    assert {"model.id", "training.store_fingerprint", "training.protocol"} <= places, _messages(problems)
    bad = tmp_path / "Bad Name"
    shutil.copytree(f, bad)
    assert any("is not a model id" in p.message for p in check_submission(bad, store)[1])


def test_unreadable_missing_duplicate_and_unknown_ids(bench: Path, tmp_path: Path, store) -> None:
    f = _copy(bench, "random-ball", tmp_path)
    ood = f / "forward" / "ood.extxyz"
    text = ood.read_text()
    first = text.split("sample_id=")[1].split()[0]
    second = text.split("sample_id=")[2].split()[0]
    ood.write_text(text.replace(f"sample_id={second}\n", f"sample_id={first}\n", 1))
    (f / "forward" / "id.extxyz").write_text("1\ncomment without id\nH 0 0 0\n")
    _, problems = check_submission(f, store)
    text = _messages(problems)
    assert f"duplicate sample id '{first}'" in text
    assert f"1 expected sample id(s) missing: {second}" in text
    assert "id.extxyz" in text and "frame 0" in text and "sample_id" in text  # the reader's message
    # an unknown id
    ood.write_text(ood.read_text().replace(f"sample_id={first}\n", "sample_id=KMgH3/R6/rot_99999\n", 1))
    assert "unknown sample id 'KMgH3/R6/rot_99999'" in _messages(check_submission(f, store)[1])


def test_missing_file_extra_files_and_undeclared_task(bench: Path, tmp_path: Path, store) -> None:
    f = _copy(bench, "majority-class", tmp_path)
    (f / "inverse" / "id.csv").unlink()
    (f / "inverse" / "notes.txt").write_text("hello")
    (f / "forward").mkdir()
    _, problems = check_submission(f, store)
    text = _messages(problems)
    assert "missing prediction file inverse/id.csv" in text
    assert "notes.txt: unexpected file" in text
    assert "does not list task 'forward'" in text
    (f / "inverse" / "training_log.csv").write_text("epoch,val_loss\n1,abc\n")
    assert "training_log.csv: line 2: val_loss: 'abc' is not a number" in _messages(check_submission(f, store)[1])


def test_task2_opaque_ids_are_accepted(bench: Path, tmp_path: Path, store) -> None:
    from c2np.tasks import opaque_sample_id

    f = _copy(bench, "majority-class", tmp_path)
    csv_path = f / "inverse" / "id.csv"
    lines = csv_path.read_text().splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        sid, rest = line.split(",", 1)
        if sid.startswith("s") and "/" not in sid:
            out.append(line)
        else:
            out.append(f"{opaque_sample_id(store.fingerprint, sid)},{rest}")
    csv_path.write_text("\n".join(out) + "\n")
    assert check_submission(f, store)[1] == []


def test_cli_check_exit_codes_and_json(bench: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    app = build_app()
    good = bench / "bench" / "submissions" / "solver"
    r = runner.invoke(app, ["submission", "check", str(good), "--store", str(bench / "ds.h5")])
    assert r.exit_code == 0 and "valid" in r.output
    f = _copy(bench, "solver", tmp_path)
    _edit(f, **{"model.category": "neural", "hardware": None})
    r = runner.invoke(app, ["submission", "check", str(f), "--store", str(bench / "ds.h5"), "--json"])
    assert r.exit_code == 2
    data = json.loads(r.stdout)
    assert data["valid"] is False and {p["place"] for p in data["problems"]} >= {"model.category", "(top level)"}
    # a missing category, or an unknown prior: one clear line naming the file and the place, exit 2
    for change, words in (({"model.category": None}, "'category' is a required property"),
                          ({"model.category": "learned+prior", "model.priors": ["vibes"]}, "'vibes' is not one of")):
        g = _copy(bench, "solver", tmp_path / f"c{len(words)}")
        _edit(g, **change)
        r = runner.invoke(app, ["submission", "check", str(g), "--store", str(bench / "ds.h5")])
        lines = [ln for ln in r.output.splitlines() if "model.yml" in ln]
        assert r.exit_code == 2 and len(lines) == 1 and words in lines[0] and "Traceback" not in r.output
    r = runner.invoke(app, ["submission", "check", str(tmp_path / "nope"), "--store", str(bench / "ds.h5")])
    assert r.exit_code == 2 and "no such submission folder" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["submission", "check", "--help"])
    assert r.exit_code == 0 and "--store" in r.output


def test_leaderboard_from_submissions_only(bench: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    app = build_app()
    subs = tmp_path / "subs"
    shutil.copytree(bench / "bench" / "submissions", subs)
    site = tmp_path / "site"
    r = runner.invoke(app, ["leaderboard", str(subs), "--store", str(bench / "ds.h5"), "-o", str(site),
                            "--bootstrap", "20", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert len(out["submissions"]) == 6 and len(out["results"]) == 12
    assert (site / "index.html").is_file() and (site / "leaderboard.md").is_file()
    yml = (site / "models" / "solver.html").read_text()
    assert "c2np.submission/1" in yml  # the model page shows its model.yml
    # the same numbers as the benchmark's own leaderboard (same harness, same files)
    ours = json.loads((site / "tables" / "forward_ood.json").read_text())["rows"]
    theirs = json.loads((bench / "bench" / "report" / "tables" / "forward_ood.json").read_text())["rows"]
    key = lambda rows: {r["model"]: r["f1@0.1"] for r in rows}  # noqa: E731
    assert key(ours) == key(theirs)
    # c2np report rebuilds the site from the leaderboard folder, model.yml included
    r = runner.invoke(app, ["report", str(site), "-o", str(tmp_path / "again"), "--store", str(bench / "ds.h5")])
    assert r.exit_code == 0, r.output
    assert "c2np.submission/1" in (tmp_path / "again" / "models" / "solver.html").read_text()
    # one bad submission: nothing is scored, every problem printed, exit 2
    _edit(subs / "solver", **{"training.store_fingerprint": "f" * 64})
    (subs / "random-ball" / "forward" / "id.extxyz").write_text("garbage\n")
    r = runner.invoke(app, ["leaderboard", str(subs), "--store", str(bench / "ds.h5"), "-o", str(tmp_path / "x")])
    assert r.exit_code == 2 and "store_fingerprint" in r.output and "id.extxyz" in r.output
    assert not (tmp_path / "x" / "index.html").exists()
    r = runner.invoke(app, ["leaderboard", str(tmp_path / "empty"), "--store", str(bench / "ds.h5"), "-o",
                            str(tmp_path / "y")])
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_report_of_a_submissions_folder_scores_it_first(bench: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    app = build_app()
    subs = tmp_path / "subs"
    shutil.copytree(bench / "bench" / "submissions" / "majority-class", subs / "majority-class")
    r = runner.invoke(app, ["report", str(subs), "-o", str(tmp_path / "s")])
    assert r.exit_code == 2 and "--store" in r.output
    r = runner.invoke(app, ["report", str(subs), "-o", str(tmp_path / "s"), "--store", str(bench / "ds.h5"),
                            "--json"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "s" / "index.html").is_file() and (tmp_path / "s" / "results").is_dir()


def test_a_leaderboard_on_fewer_rotations_scores_every_row_on_the_same_samples(bench: Path, tmp_path: Path,
                                                                              store) -> None:
    """``--per-group 1``: baselines written on 1 rotation per (material, R), a submission that
    declares the same passes, one that covers the harness's 8 is named, never mixed in."""
    from c2np.benchmark import run_benchmark
    from c2np.tasks import select_rows

    one = run_benchmark(bench / "ds.h5", tmp_path / "b1", tasks=("inverse",), per_group=1, n_resamples=10,
                        inverse_models=["composition-lookup", "majority-class"], progress=False)
    n_one = len(select_rows(store.recipes, "id", per_group=1))
    assert 0 < n_one < len(select_rows(store.recipes, "id"))
    rows = {(r.model, r.split): r.n_samples for r in one.rows}
    assert rows[("majority-class", "id")] == n_one
    sub = one.submissions_dir / "majority-class"
    assert yaml.safe_load((sub / "model.yml").read_text())["rotations_per_material_radius"] == 1
    assert check_submission(sub, store)[1] == []
    _, problems = check_submission(sub, store, per_group=8)
    assert [p.place for p in problems] == ["rotations_per_material_radius"]
    # files of 8 rotations declared as 1: the expected ids are those of the declaration
    f = _copy(bench, "majority-class", tmp_path / "lied")
    _edit(f, rotations_per_material_radius=1)
    assert "missing" in _messages(check_submission(f, store)[1])
    _edit(f, rotations_per_material_radius=0)
    assert "rotations_per_material_radius" in _messages(check_submission(f, store)[1])
    # the leaderboard refuses to mix row sets and names the submission and the key
    runner = CliRunner()
    app = build_app()
    subs = tmp_path / "mixed"
    shutil.copytree(one.submissions_dir, subs)
    shutil.copytree(bench / "bench" / "submissions" / "solver", subs / "solver")
    r = runner.invoke(app, ["leaderboard", str(subs), "--store", str(bench / "ds.h5"), "-o", str(tmp_path / "s"),
                            "--per-group", "1", "--bootstrap", "10", "--workers", "1"])
    assert r.exit_code == 2 and "rotations_per_material_radius" in r.output and "solver" in r.output
    shutil.rmtree(subs / "solver")
    r = runner.invoke(app, ["leaderboard", str(subs), "--store", str(bench / "ds.h5"), "-o", str(tmp_path / "s"),
                            "--per-group", "1", "--bootstrap", "10", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    lb = json.loads((tmp_path / "s" / "leaderboard.json").read_text())
    assert lb["extra"]["rotations_per_material_radius"] == 1
    assert {row["n_samples"] for row in lb["rows"] if row["split"] == "id"} == {n_one}
    # c2np evaluate scores such a file on the same rows
    out = tmp_path / "e.json"
    r = runner.invoke(app, ["evaluate", "--store", str(bench / "ds.h5"), "--task", "inverse", "-p",
                            str(sub / "inverse" / "id.csv"), "--split", "id", "--per-group", "1", "-o", str(out),
                            "--bootstrap", "10", "--no-progress"])
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert res["n_samples"] == n_one and res["n_failed"] == 0
    assert res["subset_definition"]["rotations_per_material_radius"] == 1
    r = runner.invoke(app, ["leaderboard", str(subs), "--store", str(bench / "ds.h5"), "-o", str(tmp_path / "z"),
                            "--per-group", "0"])
    assert r.exit_code == 2 and "--per-group" in r.output and "Traceback" not in r.output


def test_a_submission_may_declare_the_splits_it_covers(bench: Path, tmp_path: Path, store) -> None:
    """``splits: [ood]`` in model.yml: only ood.* is expected and scored; a file of another
    split is then unexpected; declaring no split the leaderboard scores is a named problem."""
    from c2np.leaderboard import build_leaderboard

    f = _copy(bench, "majority-class", tmp_path / "one", new_id="ood-only")
    _edit(f, splits=["ood"])
    problems = check_submission(f, store)[1]
    assert [p.place for p in problems] == [""] and "id.csv" in problems[0].path  # id.csv is now unexpected
    (f / "inverse" / "id.csv").unlink()
    assert check_submission(f, store)[1] == []
    _edit(f, splits=["heldout"])  # a paper store has no held-out materials
    assert [p.place for p in check_submission(f, store)[1]][0] == "splits"
    _edit(f, splits=["ood"])
    subs = tmp_path / "subs"
    shutil.copytree(bench / "bench" / "submissions" / "majority-class", subs / "majority-class")
    shutil.copytree(f, subs / "ood-only")
    lb = build_leaderboard(subs, store, results_dir=tmp_path / "r", leaderboard_dir=tmp_path / "l",
                           site_dir=tmp_path / "s", n_resamples=10)
    assert sorted((r.model, r.split) for r in lb.rows) == [("majority-class", "id"), ("majority-class", "ood"),
                                                           ("ood-only", "ood")]
