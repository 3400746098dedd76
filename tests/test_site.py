"""The offline report site: per-atom matching from the metric code, tables with the
reference baselines and CIs, downloads, escaping, self-containment (no network resource)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from c2np.carving import carve
from c2np.errors import C2NPInputError
from c2np.metrics import forward_metrics, tolerance_matching
from c2np.report import REFERENCE_BASELINES
from c2np.site.builder import build_site, model_slug
from c2np.site.pages import esc, json_script
from c2np.site.sources import SiteModel, find_results_files, load_results, models_from_results
from c2np.site.viewer import ViewerSample, atom_classes, surface_mask, viewer_payload
from conftest import crystal_zoo, perovskite

EVIL = "<script>alert('x')</script>\" onmouseover=\"y"


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    """A benchmark run (every baseline, ID + OOD) on a two-material store."""
    from c2np.benchmark import run_benchmark
    from c2np.store import build_store

    root = tmp_path_factory.mktemp("site")
    store = build_store([perovskite(), crystal_zoo()["hexagonal"]], root / "ds.h5",
                        radii_angstrom=[6, 8, 10], progress=False)
    run_benchmark(store, root / "bench", n_resamples=50, progress=False)
    return root


def _docs(bench: Path) -> list[dict]:
    return [load_results(p) for p in find_results_files([bench / "bench" / "results"])]


# ----------------------------------------------------------------------------------------
# per-atom matching (the viewer's error classes)
# ----------------------------------------------------------------------------------------
def _noisy(seed: int):
    p = carve(perovskite(), 9.0).particle
    rng = np.random.default_rng(seed)
    keep = rng.random(p.n_atoms) > 0.1
    zp = p.numbers[keep]
    xp = p.positions_angstrom[keep] + rng.normal(scale=0.12, size=(int(keep.sum()), 3))
    extra = rng.uniform(-9, 9, size=(20, 3))
    return (np.r_[zp, np.full(20, 1)], np.r_[xp, extra], p.numbers, p.positions_angstrom)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tolerance_matching_counts_what_f1_counts(seed: int) -> None:
    zp, xp, zg, xg = _noisy(seed)
    v = forward_metrics(zp, xp, zg, xg, radius_angstrom=9.0).values
    for tol in (0.1, 0.5):
        match = tolerance_matching(zp, xp, zg, xg, tolerance_angstrom=tol)
        ok = match >= 0
        m = int(ok.sum())
        assert 2 * m / (len(zp) + len(zg)) == pytest.approx(v[f"f1@{tol:g}"])
        assert len(set(match[ok].tolist())) == m  # one-to-one
        assert np.all(zp[ok] == zg[match[ok]])  # same element
        assert np.all(np.linalg.norm(xp[ok] - xg[match[ok]], axis=1) < tol)


def test_atom_classes_by_hand() -> None:
    xg = np.array([[0.0, 0, 0], [3, 0, 0], [0, 3, 0], [0, 0, 3]])
    zg = np.array([1, 1, 8, 8])
    # exact, 0.3 Å off, 2 Å off (-> extra + unmatched), wrong element at an exact site, one extra
    xp = np.array([[0.0, 0, 0], [3.3, 0, 0], [0, 5, 0], [0, 0, 3], [9, 9, 9]])
    zp = np.array([1, 1, 8, 1, 8])
    cp, cg, counts = atom_classes(zp, xp, zg, xg)
    assert cp.tolist() == [0, 1, 2, 2, 2]
    assert cg.tolist() == [0, 1, 2, 2]
    assert counts == {"0.1": 1, "0.5": 2}


def test_surface_mask_and_payload_limits() -> None:
    p = carve(perovskite(), 8.0).particle
    surf = surface_mask(p.positions_angstrom, radius_angstrom=8.0, depth_angstrom=3.0)
    r = np.linalg.norm(p.positions_angstrom, axis=1)
    assert surf.any() and (~surf).any() and np.all(r[surf] > 5.0) and np.all(r[~surf] <= 5.0)
    s = ViewerSample("KMgH3/R8/rot_0", "m", "ood", 8.0, p.numbers, p.positions_angstrom,
                     p.numbers, p.positions_angstrom)
    pay = viewer_payload(s)
    assert pay["ref"]["n"] == pay["pred"]["n"] == p.n_atoms
    assert pay["matched"] == {"0.1": p.n_atoms, "0.5": p.n_atoms}
    assert sorted(e["symbol"] for e in pay["elements"]) == ["H", "K", "Mg"]
    with pytest.raises(C2NPInputError, match="viewer's limit"):
        viewer_payload(s, max_atoms=10)


# ----------------------------------------------------------------------------------------
# escaping
# ----------------------------------------------------------------------------------------
def test_escape_and_json_script_cannot_break_out() -> None:
    assert "<" not in esc(EVIL) and '"' not in esc(EVIL)
    html = json_script({"name": "</script><script>alert(1)</script>"}, "d")
    assert html.count("</script>") == 1 and html.endswith("</script>")
    inner = html[html.index(">") + 1:-len("</script>")]
    assert json.loads(inner)["name"] == "</script><script>alert(1)</script>"


def test_model_slug_is_a_safe_unique_file_name() -> None:
    assert model_slug("flowmm-v2.1_a") == "flowmm-v2.1_a"
    for bad in (EVIL, "../../etc/passwd", ".hidden", "a b", "ü"):
        s = model_slug(bad)
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", s) and "/" not in s
    assert model_slug("a b") != model_slug("a_b")


# ----------------------------------------------------------------------------------------
# the built site
# ----------------------------------------------------------------------------------------
def _evil_model(docs: list[dict]) -> SiteModel:
    """A copy of the memorisation results under a hostile name."""
    out = []
    for d in docs:
        if d["model"] == "memorisation":
            e = json.loads(json.dumps(d))
            e["model"] = EVIL
            e["predictions"]["path"] = None
            e["failed_samples"] = [{"sample_id": "<i>x</i>", "reason": "<b>bad</b>"}]
            out.append(e)
    return SiteModel(EVIL, tuple(out), model_yml=f"model:\n  name: '{EVIL}'\n")


@pytest.fixture(scope="module")
def site(bench: Path, tmp_path_factory) -> Path:
    from c2np.store import DatasetStore

    docs = _docs(bench)
    models = models_from_results(docs) + [_evil_model(docs)]
    out = tmp_path_factory.mktemp("built") / "site"
    build_site(models, out, store=DatasetStore.open(bench / "ds.h5"))
    return out


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_site_pages_exist_and_are_self_contained(site: Path) -> None:
    names = {str(p.relative_to(site)) for p in _pages(site)}
    assert {"index.html", "task-forward.html", "task-inverse.html"} <= names
    for b in (*REFERENCE_BASELINES["forward"], *REFERENCE_BASELINES["inverse"]):
        assert f"models/{b}.html" in names
    for b in REFERENCE_BASELINES["forward"]:
        assert f"viewer/{b}.html" in names
    assert (site / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    for p in _pages(site):
        text = p.read_text()
        # every referenced resource is a relative file of the site
        for ref in re.findall(r'(?:src|href)="([^"]*)"', text):
            assert not re.match(r"[a-z]+:", ref), (p, ref)
            assert (p.parent / ref).resolve().is_file(), (p, ref)
        assert "http://" not in text and "https://" not in text, p


def test_user_text_is_escaped_everywhere(site: Path) -> None:
    evil_page = site / "models" / f"{model_slug(EVIL)}.html"
    assert evil_page.is_file()
    for p in _pages(site):
        text = p.read_text()
        assert "<script>alert" not in text and 'onmouseover="y' not in text, p
        assert "<b>bad</b>" not in text and "<i>x</i>" not in text, p
    text = evil_page.read_text()
    assert esc(EVIL) in text and "&lt;b&gt;bad&lt;/b&gt;" in text
    index = (site / "index.html").read_text()
    assert esc(EVIL) in index


def _table_blocks(html: str) -> list[str]:
    return re.findall(r'<table class="c2np-table".*?</table>', html, flags=re.S)


def test_every_table_shows_the_reference_baselines_with_cis(site: Path) -> None:
    n_tables = 0
    for p in [site / "index.html", site / "task-forward.html", site / "task-inverse.html",
              *sorted((site / "models").glob("*.html"))]:
        html = p.read_text()
        for block in _table_blocks(html):
            tid = re.search(r'id="table-([^"]+)"', block).group(1)
            data = json.loads((site / "tables" / f"{tid}.json").read_text())
            task = data["meta"]["task"]
            models = {r["model"] for r in data["rows"]}
            assert set(REFERENCE_BASELINES[task]) <= models, (p, tid)
            if tid.endswith("_all"):
                continue
            n_tables += 1
            assert 'class="ci"' in block  # intervals are on the page
            for b in REFERENCE_BASELINES[task]:
                assert f">{b}</a>" in block, (p, tid, b)
    assert n_tables >= 10


def test_downloads_match_the_tables(site: Path, bench: Path) -> None:
    html = (site / "task-forward.html").read_text()
    links = re.findall(r'href="(tables/[^"]+)" download', html)
    assert any(x.endswith(".csv") for x in links) and any(x.endswith(".json") for x in links)
    for link in links:
        assert (site / link).is_file()
    rows = list(csv.DictReader(io.StringIO((site / "tables" / "forward_ood.csv").read_text())))
    by_model = {r["model"]: r for r in rows}
    doc = next(d for d in _docs(bench) if d["model"] == "memorisation" and d["split"] == "ood"
               and d["task"] == "forward")
    s = doc["metrics"]["overall"]["f1@0.1"]
    r = by_model["memorisation"]
    assert float(r["f1@0.1"]) == pytest.approx(s["mean"])
    assert [float(r["f1@0.1_ci95_lo"]), float(r["f1@0.1_ci95_hi"])] == pytest.approx(s["ci95"])
    assert int(r["n_failed"]) == doc["n_failed"] and int(r["n"]) == doc["n_samples"]
    assert float(by_model["analytic-carve"]["f1@0.1_normalised"]) == pytest.approx(1.0)
    assert float(by_model["random-ball"]["f1@0.1_normalised"]) == pytest.approx(0.0)


def test_missing_baseline_is_shown_not_dropped(bench: Path, tmp_path: Path) -> None:
    docs = [d for d in _docs(bench) if d["model"] != "solver"]
    s = build_site(models_from_results(docs), tmp_path / "s")
    assert any("solver" in n for n in s.notes)
    data = json.loads((tmp_path / "s" / "tables" / "inverse_id.json").read_text())
    row = next(r for r in data["rows"] if r["model"] == "solver")
    assert "not in the inputs" in row["kind"] and row["n"] is None
    assert "not in the inputs" in (tmp_path / "s" / "task-inverse.html").read_text()
    assert not s.viewers  # no store: no viewer, and the task page says why
    assert "needs the dataset store" in (tmp_path / "s" / "task-forward.html").read_text()


def test_mixed_fingerprints_and_duplicates_are_bad_input(bench: Path, tmp_path: Path) -> None:
    docs = _docs(bench)
    other = json.loads(json.dumps(docs[0]))
    other["model"] = "other"
    other["dataset"]["fingerprint"] = "0" * 64
    with pytest.raises(C2NPInputError, match="fingerprint"):
        build_site(models_from_results(docs + [other]), tmp_path / "s")
    with pytest.raises(C2NPInputError, match="two results documents"):
        models_from_results(docs + [docs[0]])
    # results scored on another number of rotations per (material, R) are other rows
    fewer = json.loads(json.dumps(docs[0]))
    fewer["model"] = "fewer"
    fewer["subset_definition"]["rotations_per_material_radius"] = 1
    with pytest.raises(C2NPInputError, match="1 rotation per"):
        build_site(models_from_results(docs + [fewer]), tmp_path / "s2")


def test_loss_vs_fidelity_plot_from_a_training_log(bench: Path, tmp_path: Path) -> None:
    from c2np.models.diagnostic import FIDELITY
    from c2np.models.training import LOG_COLUMNS

    log = tmp_path / "log.csv"
    rows = [",".join(LOG_COLUMNS)]
    for e in range(1, 5):
        vals = {"epoch": e, "step": 10 * e, "train_loss": 2.0 / e, "val_loss": 2.2 / e,
                FIDELITY["forward"][0]: 0.1 * e}
        rows.append(",".join(str(vals.get(c, "")) for c in LOG_COLUMNS))
    log.write_text("\n".join(rows) + "\n")
    docs = _docs(bench)
    models = [m if m.model_id != "memorisation" else
              SiteModel(m.model_id, m.results, m.model_yml, m.metadata, m.predictions, {"forward": log})
              for m in models_from_results(docs)]
    build_site(models, tmp_path / "s")
    html = (tmp_path / "s" / "task-forward.html").read_text()
    fig = json.loads(re.search(r'id="forward-loss-fidelity-fig">(.*?)</script>', html).group(1))
    first = fig["data"][0]
    assert first["name"] == "memorisation" and first["y"] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert first["x"] == pytest.approx([2.2, 1.1, 2.2 / 3, 0.55])


def test_plots_come_from_the_results(site: Path, bench: Path) -> None:
    html = (site / "task-forward.html").read_text()
    fig = json.loads(re.search(r'id="forward-f1_0.1-radius-fig">(.*?)</script>', html).group(1))
    trace = next(t for t in fig["data"] if t["name"] == "random-ball")
    docs = [d for d in _docs(bench) if d["model"] == "random-ball" and d["task"] == "forward"]
    per_r = {int(r): v["f1@0.1"]["mean"] for d in docs for r, v in d["metrics"]["per_radius"].items()}
    assert dict(zip(trace["x"], trace["y"])) == pytest.approx(per_r)
    shaded = {(s["x0"] + s["x1"]) / 2 for s in fig["layout"]["shapes"]}
    # OOD and ID radii marked where the store has them (radii 6, 8, 10): nothing beyond
    assert shaded == {6.0, 10.0}
    lo, hi = fig["layout"]["xaxis"]["range"]
    assert 5 < lo < 6 and 10 < hi < 11
    inv = (site / "task-inverse.html").read_text()
    conf = json.loads(re.search(r'id="confusion-solver-ood-fig">(.*?)</script>', inv).group(1))
    assert sum(map(sum, conf["data"][0]["z"])) == next(
        d["n_samples"] for d in _docs(bench) if d["model"] == "solver" and d["split"] == "ood")


def test_benchmark_writes_the_report_beside_the_leaderboard(bench: Path) -> None:
    out = bench / "bench"
    assert (out / "leaderboard.md").is_file() and (out / "report" / "index.html").is_file()
    manifest = json.loads((out / "report" / "site.json").read_text())
    assert set(manifest["viewers"]) == set(REFERENCE_BASELINES["forward"])


def test_cli_report_rebuilds_the_site_and_rejects_bad_input(bench: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from c2np.cli import build_app

    runner = CliRunner()
    app = build_app()
    r = runner.invoke(app, ["report", "--help"])
    assert r.exit_code == 0 and "--store" in r.output
    r = runner.invoke(app, ["report", str(bench / "bench"), "-o", str(tmp_path / "s"),
                            "--store", str(bench / "ds.h5"), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert Path(out["index"]).is_file() and len(out["viewers"]) == 3
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.json").write_text('{"schema": "something-else"}')
    r = runner.invoke(app, ["report", str(bad), "-o", str(tmp_path / "t")])
    assert r.exit_code == 2 and "x.json" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["report", str(tmp_path / "nope"), "-o", str(tmp_path / "t")])
    assert r.exit_code == 2 and "no such" in r.output
    (tmp_path / "file").write_text("")
    r = runner.invoke(app, ["report", str(bench / "bench"), "-o", str(tmp_path / "file")])
    assert r.exit_code == 2 and "not a folder" in r.output


def test_a_store_of_other_data_is_refused(bench: Path, tmp_path: Path) -> None:
    from c2np.store import DatasetStore, build_store

    other = build_store([perovskite()], tmp_path / "other.h5", radii_angstrom=[6, 8, 10], progress=False)
    with pytest.raises(C2NPInputError, match="fingerprint"):
        build_site(models_from_results(_docs(bench)), tmp_path / "s", store=DatasetStore.open(other))
