"""Ablations of a task-2 crystal generator's settings (c2np.models.inverse.ablation) and the
priors its configuration names (c2np.models.priors.inverse_priors, pool_priors): as shipped the
configuration is untouched, each arm removes exactly the prior it names, and the candidates
change accordingly."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from c2np.carving import carve
from c2np.categories import name_with_priors
from c2np.errors import C2NPInputError
from c2np.models.inverse.ablation import ABLATIONS, ablate, ablated_config
from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.examples import cell_example
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.pool import GeneratorPool, PoolRule, load_pool
from c2np.models.inverse.ranking import cell_pair_profile, particle_pair_profile, profile_mismatch
from c2np.models.inverse.templates import template_of
from c2np.models.priors import category_of_priors, inverse_priors, pool_priors
from c2np.particle_descriptor import describe
from helpers import crystal_zoo

PRETRAINED = Path(__file__).resolve().parents[1] / "pretrained"
SHIPPED = GenConfig(z_candidates="templates", read_rule="template", rank="refine", crop_radii_angstrom=(8.0,),
                    symmetric_margin=0.01, min_pair_angstrom=0.7)


def test_inverse_priors_follow_what_the_config_does() -> None:
    assert inverse_priors(dataclasses.asdict(GenConfig())) == ()                 # head, plateau, vote
    assert category_of_priors(inverse_priors(dataclasses.asdict(GenConfig()))).category == "learned"
    # the template read-out without templates is the tightest read-out: no template prior
    assert inverse_priors({"z_candidates": "head", "read_rule": "template", "rank": "vote"}) == ()
    assert inverse_priors({"rank": "profile"}) == ("profile-ranking",)
    assert inverse_priors({"rank": "stretch"}) == ("profile-ranking", "profile-refinement")
    assert inverse_priors(dataclasses.asdict(SHIPPED)) == (
        "spacegroup-templates", "profile-ranking", "profile-refinement", "central-crop")


def test_shipped_generators_are_named_with_their_priors() -> None:
    names = {}
    for folder in sorted(PRETRAINED.glob("*-inverse")):
        if (folder / "pool.json").is_file():
            cfgs = [dataclasses.asdict(gen.cfg) for _, gen in load_pool(folder).members]
            names[folder.name] = name_with_priors("-".join(c["process"] for c in cfgs), pool_priors(cfgs))
        else:
            cfg = json.loads((folder / "config.json").read_text())["config"]
            names[folder.name] = name_with_priors(cfg["process"], inverse_priors(cfg))
            assert category_of_priors(inverse_priors(cfg)).category == "learned+prior"
    assert names["diffcsp-inverse"] == "diffcsp+templates+rank+refine+crop"
    for family in ("flowmm", "mattergen", "cdvae", "adit"):
        assert names[f"{family}-inverse"] == f"{family}+templates+rank+refine"
    # the pool's DiffCSP member is the one shipped before central crops
    assert names["diffcsp-flowmm-pool-inverse"] == "diffcsp-flowmm+templates+rank+refine+pool"


def test_pool_priors_are_the_union_of_its_members_and_ensemble() -> None:
    plain = dataclasses.asdict(GenConfig(rank="profile"))
    assert pool_priors([plain, plain]) == ("profile-ranking", "ensemble")
    assert pool_priors([plain, dataclasses.asdict(SHIPPED)]) == (
        "spacegroup-templates", "profile-ranking", "profile-refinement", "central-crop", "ensemble")


def test_each_arm_changes_only_what_it_claims() -> None:
    assert ablated_config(SHIPPED) is SHIPPED and ablated_config(SHIPPED, "shipped") is SHIPPED
    changed = {}
    for arm in ABLATIONS:
        cfg = ablated_config(SHIPPED, arm)
        changed[arm] = {k for k, v in dataclasses.asdict(cfg).items() if dataclasses.asdict(SHIPPED)[k] != v}
        dropped = set(inverse_priors(dataclasses.asdict(SHIPPED))) - set(inverse_priors(dataclasses.asdict(cfg)))
        changed[arm + " drops"] = dropped
    assert changed["shipped"] == set() and changed["shipped drops"] == set()
    assert changed["templates-off"] == {"z_candidates", "read_rule"}
    assert changed["templates-off drops"] == {"spacegroup-templates"}
    assert ablated_config(SHIPPED, "templates-off").read_rule == "plateau"
    assert changed["refinement-off"] == {"rank"} and changed["refinement-off drops"] == {"profile-refinement"}
    assert changed["crop-off"] == {"crop_radii_angstrom"} and changed["crop-off drops"] == {"central-crop"}
    plain = GenConfig()                     # an arm whose prior is not used: an equal configuration
    assert all(ablated_config(plain, arm) == plain for arm in ABLATIONS)
    with pytest.raises(C2NPInputError, match="ablation must be one of"):
        ablated_config(SHIPPED, "no-network")


@pytest.fixture(scope="module")
def setup():
    cell = crystal_zoo()["orthorhombic"]                    # NaMgH3, Pnma
    big = carve(cell, 11.0).particle
    ex = cell_example(describe(big), cell)
    t = template_of(ex.lattice_angstrom, ex.frac, ex.slots, "NaMgH3")
    cfg = GenConfig(hidden=16, layers=1, steps=6, train_steps=0, z_candidates="templates", read_rule="template",
                    rank="refine", refine_top=1, refine_evals=20, n_samples=2, crop_radii_angstrom=(6.0,))
    n = len(CrystalGenerator.features([ex.descriptor])[0])
    torch.manual_seed(0)
    model = CrystalGenerator(cfg, n, [t.composition], np.zeros(n), np.ones(n),
                             ex.lattice_angstrom / ex.descriptor.scale_angstrom, 0.05)
    model.templates = [t]
    return model, big


def test_arms_change_the_candidates_as_claimed(setup) -> None:
    model, big = setup
    d = describe(big)
    prof = [particle_pair_profile(big, d)]

    def cands(gen):
        return gen.candidates([d], seed=3, profiles=prof, particles=[big])[0]

    shipped = cands(ablate(model, "shipped"))
    assert ablate(model, "shipped") is model
    assert {c.view_radius_angstrom for c in shipped} == {0.0, 6.0}
    assert all(c.template_spacegroup == 62 for c in shipped)
    no_t = cands(ablate(model, "templates-off"))
    assert no_t and all(c.template_spacegroup == 0 and c.n_operations == 0 for c in no_t)
    no_crop = cands(ablate(model, "crop-off"))
    assert {c.view_radius_angstrom for c in no_crop} == {0.0}
    no_ref = cands(ablate(model, "refinement-off"))
    # the cells are ranked as generated: the mismatch is that of the cell itself, unstretched
    for c in no_ref:
        lat, frac, sl = c.cell
        assert c.mismatch == pytest.approx(profile_mismatch(prof[0], cell_pair_profile(lat, frac, sl,
                                                                                      d.scale_angstrom)))
    # the ablated copies share the weights and leave the shipped generator untouched
    assert model.cfg.rank == "refine" and model.cfg.crop_radii_angstrom == (6.0,)
    assert ablate(model, "crop-off").net is model.net
    assert [c.params.tolist() for c in cands(model)] == [c.params.tolist() for c in shipped]


def test_ablating_a_pool_ablates_every_member(setup) -> None:
    model, _ = setup
    pool = GeneratorPool([("a", model), ("b", ablate(model, "templates-off"))], PoolRule())
    out = ablate(pool, "crop-off")
    assert [g.cfg.crop_radii_angstrom for _, g in out.members] == [(), ()]
    assert [g.cfg.crop_radii_angstrom for _, g in pool.members] == [(6.0,), (6.0,)]
    assert ablate(pool, "shipped") is pool


def test_config_choice_and_ablation_modules_are_torch_free() -> None:
    import subprocess
    import sys

    code = ("import sys; import c2np.models.inverse, c2np.models.inverse.config, c2np.models.inverse.ablation, "
            "c2np.models.inverse.choice, c2np.models.inverse.readout, c2np.models.priors; "
            "assert 'torch' not in sys.modules")
    src = str(Path(__file__).resolve().parents[1] / "src")
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": src})


def test_every_process_name_has_its_class() -> None:
    from c2np.models.inverse.config import PROCESSES
    from c2np.models.inverse.registry import PROCESS_CLASSES, process_for

    assert tuple(PROCESS_CLASSES) == PROCESSES
    for name in PROCESSES:
        proc = process_for(GenConfig(process=name))
        assert type(proc).name == name and proc.cfg.process == name
    assert [n for n in PROCESSES if PROCESS_CLASSES[n].typed] == ["mattergen"]
