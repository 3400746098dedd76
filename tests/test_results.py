"""The results record: schema, provenance, and the content hash that refuses edited files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from c2np.baselines import analytic_carve, predict
from c2np.errors import C2NPInputError
from c2np.evaluation.results import HASH_KEY, RESULTS_SCHEMA, Results, canonical_json, content_sha256
from c2np.store import DatasetStore
from c2np.tasks import ForwardTask
from helpers import two_perovskite_store


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Results, DatasetStore]:
    store = DatasetStore.open(two_perovskite_store(tmp_path_factory.mktemp("r") / "ds.h5"))
    task = ForwardTask(store, "id")
    return task.evaluate(predict(task, analytic_carve), model="carve", n_resamples=50), store


def test_results_json_roundtrip(tmp_path: Path, results: tuple[Results, DatasetStore]) -> None:
    res, store = results
    back = Results.read(res.write(tmp_path / "r.json"))
    d = back.data
    assert d == res.data and back.sha256 == res.sha256 == content_sha256(d)
    assert d["schema"] == RESULTS_SCHEMA == "c2np.results/3" and d["task"] == "forward" and d["model"] == "carve"
    assert d["category"] == "unstated" and d["priors"] == []  # the caller named no category
    assert d["dataset"]["fingerprint"] == store.fingerprint and d["protocol"] == "paper"
    assert {"numpy", "scipy", "c2np"} <= set(d["versions"])
    assert d["tolerances"]["f1_tolerances_angstrom"] == [0.1, 0.5]
    # the matched RMSD's far rule that scored these samples is recorded with them
    from c2np import assignment

    assert d["tolerances"]["matched_rmsd_far_rmsd_angstrom"] == assignment.FAR_RMSD_ANGSTROM == 1.0
    assert d["tolerances"]["matched_rmsd_far_rel_gap"] == assignment.FAR_REL_GAP == 0.05
    assert d["subset_definition"]["rotations_per_material_radius"] == 8
    assert len(d["samples"]["sample_id"]) == d["n_samples"] == back.n_samples == 16


def test_hash_is_over_canonical_json() -> None:
    a = Results({"schema": RESULTS_SCHEMA, "x": 1.5, "y": [1, 2]})
    b = Results({"y": [1, 2], "x": 1.5, "schema": RESULTS_SCHEMA})
    assert a.sha256 == b.sha256  # key order does not matter
    assert canonical_json(a.data) == '{"schema":"c2np.results/3","x":1.5,"y":[1,2]}'
    assert Results({"schema": RESULTS_SCHEMA, "x": 1.5000001, "y": [1, 2]}).sha256 != a.sha256


def test_read_refuses_edited_or_unhashed_files(tmp_path: Path, results: tuple[Results, DatasetStore]) -> None:
    res, _ = results
    path = res.write(tmp_path / "r.json")
    data = json.loads(path.read_text())
    data["metrics"]["overall"]["f1@0.1"]["mean"] = 0.99  # a hand-edited score
    path.write_text(json.dumps(data))
    with pytest.raises(C2NPInputError, match=r"r\.json: content does not match its content_sha256"):
        Results.read(path)
    del data[HASH_KEY]
    path.write_text(json.dumps(data))
    with pytest.raises(C2NPInputError, match="no content_sha256"):
        Results.read(path)
    data["schema"] = "c2np.results/1"
    path.write_text(json.dumps(data))
    with pytest.raises(C2NPInputError, match="schema 'c2np.results/1'"):
        Results.read(path)
    path.write_text("[1, 2]")
    with pytest.raises(C2NPInputError, match="not a results document"):
        Results.read(path)
    changed = Results(dict(res.data))
    changed.data["model"] = "other"
    with pytest.raises(C2NPInputError, match="changed after it was built"):
        changed.write(tmp_path / "c.json")


def test_results_record_the_category_and_read_refuses_a_bad_one(tmp_path: Path,
                                                                 results: tuple[Results, DatasetStore]) -> None:
    from c2np.categories import check_category

    _, store = results
    task = ForwardTask(store, "id")
    cat = check_category("learned+prior", ["sphere-boundary", "lattice-sites"])
    res = task.evaluate(predict(task, analytic_carve), model="m", category=cat, n_resamples=20)
    assert res.data["category"] == "learned+prior" and res.data["priors"] == ["lattice-sites", "sphere-boundary"]
    path = res.write(tmp_path / "c.json")
    assert Results.read(path).data["priors"] == ["lattice-sites", "sphere-boundary"]
    for category, priors, words in (("learned", ["carve"], "takes no priors"), ("clever", [], "is not one of"),
                                    ("learned+prior", ["vibes"], "unknown prior")):
        doc = {**res.data, "category": category, "priors": priors}
        doc[HASH_KEY] = content_sha256(doc)  # a consistent hash: the category itself is refused
        path.write_text(json.dumps(doc))
        with pytest.raises(C2NPInputError, match=words):
            Results.read(path)


def test_results_load_into_one_dataframe(tmp_path: Path, results: tuple[Results, DatasetStore]) -> None:
    pd = pytest.importorskip("pandas")
    from c2np.evaluation.results import DATAFRAME_COLUMNS, to_dataframe

    res, store = results
    folder = tmp_path / "results"
    a = res.write(folder / "carve.json")
    task = ForwardTask(store, "ood")
    other = task.evaluate(predict(task, analytic_carve), model="carve", n_resamples=20)
    other.write(folder / "sub" / "carve_ood.json")
    (folder / "leaderboard.json").write_text('{"not": "results"}')  # other JSON in a folder is skipped
    df = to_dataframe(folder)
    assert isinstance(df, pd.DataFrame) and list(df.columns) == list(DATAFRAME_COLUMNS)
    n_metrics = len(res.overall)
    assert len(df) == 2 * n_metrics and set(df["split"]) == {"id", "ood"}
    row = df[(df["split"] == "id") & (df["metric"] == "f1@0.1")].iloc[0]
    assert row["mean"] == res.overall["f1@0.1"]["mean"] == 1.0
    assert [row["ci95_low"], row["ci95_high"]] == res.overall["f1@0.1"]["ci95"]
    assert row["fingerprint"] == store.fingerprint and row["path"] == str(a) and row["category"] == "unstated"
    assert len(to_dataframe([a, other])) == 2 * n_metrics  # files and records mix
    samples = to_dataframe(a, level="samples")
    assert len(samples) == res.n_samples and samples["sample_id"].tolist() == res.data["samples"]["sample_id"]
    assert {"model", "split", "ok", "f1@0.1"} <= set(samples.columns)
    bad = tmp_path / "edited.json"
    bad.write_text(a.read_text().replace('"model": "carve"', '"model": "better"'))
    with pytest.raises(C2NPInputError, match="does not match"):
        to_dataframe(bad)
