"""Faithful configurations of the task-1 families (category ``learned``), the remedies, and the
smoke path of the gate script reproduce/faithful/gate.py."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from c2np.errors import C2NPInputError
from c2np.models.config import PRESETS
from c2np.models.faithful import (
    FAITHFUL_FAMILIES,
    NO_PRIOR_FIELDS,
    REMEDIES,
    apply_remedy,
    faithful_config,
    reference_sampler,
)
from c2np.models.priors import category_of_priors, forward_priors

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("family", FAITHFUL_FAMILIES)
@pytest.mark.parametrize("base", sorted(PRESETS))
def test_faithful_config_carries_no_prior(family, base):
    # every preset but tiny has the site-assignment head and the family priors on
    before = forward_priors(family, PRESETS[base].to_dict())
    cfg = faithful_config(family, base)
    assert forward_priors(family, cfg.to_dict()) == ()
    assert category_of_priors(forward_priors(family, cfg.to_dict())).category == "learned"
    if base != "tiny":
        assert "lattice-sites" in before
    assert not cfg.site_features and cfg.exclusion_iters == 0 and cfg.sample_site_tol_angstrom == 0.0
    assert cfg.confine_margin < 0 and cfg.sample_count_margin == 0.0
    # the rest of the gate configuration is kept (architecture, schedule, sampler)
    assert cfg.hidden == PRESETS[base].hidden and cfg.lr_schedule == PRESETS[base].lr_schedule


def test_faithful_config_refuses_priors_and_unknown_families():
    with pytest.raises(C2NPInputError, match="prior-free"):
        faithful_config("mattergen", "small", site_features=True)
    with pytest.raises(C2NPInputError, match="sample_site_tol_angstrom"):
        faithful_config("mattergen", "small", sample_site_tol_angstrom=0.5)
    with pytest.raises(C2NPInputError, match="unknown faithful family"):
        faithful_config("sitescore", "small")
    # a config object is taken as the base as is (no gate overrides), priors switched off
    cfg = faithful_config("cdvae", PRESETS["paper"], hidden=128)
    assert cfg.hidden == 128 and cfg.sample_steps == PRESETS["paper"].sample_steps
    assert all(getattr(cfg, k) == v for k, v in NO_PRIOR_FIELDS.items())


@pytest.mark.parametrize("family", FAITHFUL_FAMILIES)
def test_remedies_stay_prior_free_and_change_what_they_name(family):
    base = faithful_config(family, "small")
    for name, rem in REMEDIES.items():
        cfg, steps = apply_remedy(name, family, base, 1000)
        assert forward_priors(family, cfg.to_dict()) == (), name
        if name == "larger-network":
            assert (cfg.hidden, cfg.layers, steps) == (2 * base.hidden, base.layers + 2, 1000)
        elif name == "long-schedule":
            assert steps == 3000 and cfg == base
        elif name == "no-corrector":
            assert cfg.corrector_steps == 0 and rem.applies(family) == (family in ("diffcsp", "mattergen", "adit"))
        elif name == "10x-steps":
            assert cfg.sample_steps == 10 * base.sample_steps
        elif name == "faithful":
            assert cfg == base and steps == 1000
    with pytest.raises(C2NPInputError, match="unknown remedy"):
        apply_remedy("edm", family, base, 10)


def test_reference_samplers():
    cfg = faithful_config("cdvae", "small")
    assert reference_sampler("cdvae", cfg) == {"sample_steps": 100 * cfg.langevin_levels}
    assert reference_sampler("diffcsp", cfg) == {"sample_steps": 1000, "corrector_steps": 1}
    assert reference_sampler("mattergen", cfg) == {"sample_steps": 1000, "corrector_steps": 1}
    assert reference_sampler("adit", cfg)["corrector_steps"] == 0


def test_faithful_module_is_torch_free():
    code = "import sys, c2np.models.faithful; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "False"


def _gate_module():
    spec = importlib.util.spec_from_file_location("faithful_gate_script", ROOT / "reproduce/faithful/gate.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.usefixtures("torch_one_thread")
def test_gate_script_smoke_path(tmp_path):
    pytest.importorskip("torch")
    gate = _gate_module()
    js, md = tmp_path / "gate.json", tmp_path / "gate.md"
    smoke = ["--smoke", "--sizes", "ci", "--families", "cdvae,diffcsp"]
    assert gate.main([*smoke, "--json", str(js), "--md", str(md)]) == 0
    data = json.loads(js.read_text())
    rows = data["rows"]
    learned = [r for r in rows if r["kind"] != "baseline"]
    assert {r["family"] for r in learned} == {"cdvae", "diffcsp"}
    assert {r["family"] for r in rows if r["kind"] == "baseline"} == {"analytic-carve", "memorisation", "random-ball"}
    carve = next(r for r in rows if r["family"] == "analytic-carve")
    assert carve["f1_0p5_mean"] == 1.0 and carve["count_error_mean"] == 0.0
    for r in learned:
        assert r["category"] == "learned" and r["priors"] == []
        assert len(r["f1_0p5"]) == 8 and r["f1_0p5_lo"] <= r["f1_0p5_mean"] <= r["f1_0p5_hi"]
        assert r["passes"] == (r["f1_0p5_mean"] >= 0.9)
        assert r["sampler"]["sample_steps"] <= 4
    # no corrector row where the family has none; training remedies retrain
    assert [r["remedy"] for r in learned if r["family"] == "cdvae"] == [
        "faithful", "reference-sampler", "10x-steps", "larger-network", "long-schedule"]
    assert any(r["family"] == "diffcsp" and r["remedy"] == "no-corrector" for r in rows)
    assert all(r["steps"] == 9 for r in learned if r["remedy"] == "long-schedule")
    # the markdown is generated from the JSON alone
    text = md.read_text()
    assert "| analytic-carve | baseline | analytic |" in text and "## R = 4.5 Å" in text
    md.unlink()
    assert gate.main(["--render", "--json", str(js), "--md", str(md)]) == 0
    assert md.read_text() == text
    # resume skips what is there: nothing new is trained
    assert gate.main([*smoke, "--resume", "--json", str(js), "--md", str(md)]) == 0
    assert len(json.loads(js.read_text())["rows"]) == len(rows)


def test_gate_script_bad_arguments(tmp_path, capsys):
    gate = _gate_module()
    assert gate.main(["--families", "nope", "--json", str(tmp_path / "x.json")]) == 2
    assert gate.main(["--samples", "4", "--json", str(tmp_path / "x.json")]) == 2
    assert gate.main(["--render", "--json", str(tmp_path / "missing.json"), "--md", str(tmp_path / "m.md")]) == 2
    assert "unknown size / family / remedy ['nope']" in capsys.readouterr().err


def _gpu_module():
    spec = importlib.util.spec_from_file_location("faithful_gpu_script", ROOT / "reproduce/faithful/gpu.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.usefixtures("torch_one_thread")
def test_gpu_script_smoke_path(tmp_path):
    torch = pytest.importorskip("torch")
    gpu = _gpu_module()
    js, md = tmp_path / "gpu.json", tmp_path / "gpu.md"
    assert gpu.main(["--smoke", "--families", "mattergen", "--train-seconds", "0.5", "--radius", "4.5",
                     "--json", str(js), "--md", str(md)]) == 0
    data = json.loads(js.read_text())
    learned = [r for r in data["rows"] if r["category"] == "learned"]
    assert [(r["family"], r["remedy"]) for r in learned] == [("mattergen", "reference-sampler"),
                                                             ("mattergen", "no-corrector")]
    assert all(r["device"] == "cpu" and r["priors"] == [] and len(r["f1_0p5"]) == 8 for r in learned)
    assert learned[1]["sampler"]["corrector_steps"] == 0 and learned[0]["sampler"]["corrector_steps"] == 1
    assert {r["family"] for r in data["rows"] if r["category"] != "learned"} == {"analytic-carve", "memorisation",
                                                                                   "random-ball"}
    assert data["meta"]["smoke"] and "Smoke run" in md.read_text()
    if not torch.cuda.is_available():  # asking for a GPU that is not there: one line, exit 2
        assert gpu.main(["--device", "cuda", "--json", str(js), "--md", str(md)]) == 2
