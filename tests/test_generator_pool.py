"""A pool of task-2 crystal generators (c2np.models.inverse.pool): its candidates are exactly
its members' own, the choice among them is the ranking rule over all of them, its folder names
its members (resolved safely, never outside the folder's parent) and the shipped pool's
members are the shipped generators."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from c2np.carving import carve
from c2np.errors import C2NPInputError
from c2np.models.inverse.choice import Candidate
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.io import load_generator
from c2np.models.inverse.pool import POOL_FILE, GeneratorPool, PoolRule, load_inverse_generator, load_pool, save_pool
from c2np.models.inverse.ranking import particle_pair_profile
from c2np.particle_descriptor import describe
from helpers import perovskite

PRETRAINED = Path(__file__).resolve().parents[1] / "pretrained"
SHIPPED = PRETRAINED / "diffcsp-flowmm-pool-inverse"


def _cand(sg: int, mismatch: float, ops: int, *, a: float = 4.0, min_pair: float = 1.5, gen: str = "") -> Candidate:
    return Candidate((1, 1, 3), np.array([a, a, a, 90.0, 90.0, 90.0]), sg, min_pair, mismatch, 0.0, a ** 3,
                     template_spacegroup=sg, n_operations=ops, generator=gen)


def _cheap(gen: CrystalGenerator) -> CrystalGenerator:
    """The member with few samples and short fits (the test's cost, not the shipped settings)."""
    gen.cfg = dataclasses.replace(gen.cfg, n_samples=1, sample_steps=20, refine_screen_evals=0, refine_evals=10)
    gen.templates = [next(t for t in gen.templates if t.spacegroup == sg) for sg in (62, 221)]
    return gen


def _pool() -> GeneratorPool:
    return GeneratorPool([(n, _cheap(load_generator(PRETRAINED / n))) for n in ("diffcsp-inverse", "flowmm-inverse")],
                         PoolRule())


def test_pool_candidates_are_the_members_own() -> None:
    pool = _pool()
    particles = [carve(perovskite(a=4.02), 6.0).particle, carve(perovskite(a=3.9), 7.0).particle]
    descs = [describe(p) for p in particles]
    profiles = [particle_pair_profile(p, d) for p, d in zip(particles, descs)]
    pooled = pool.candidates(descs, seed=3, profiles=profiles, particles=particles)
    own_all = {name: gen.candidates(descs, seed=3, profiles=profiles, particles=particles)
               for name, gen in pool.members}
    for i in range(len(particles)):
        k = 0
        for name, _ in pool.members:
            own = own_all[name][i]
            assert len(own) > 0
            for c in own:
                p = pooled[i][k]
                assert p.generator == name and p.spacegroup == c.spacegroup
                assert p.mismatch == c.mismatch and np.array_equal(p.params, c.params)
                k += 1
        assert k == len(pooled[i])
    (pred,) = pool.predict_particles(particles[:1], seed=3)
    assert pred is not None and pred.as_tuple()[-1] == 221


def test_pool_choice_is_the_smallest_mismatch_over_every_member() -> None:
    pool = GeneratorPool.__new__(GeneratorPool)
    pool.rule = PoolRule(symmetric_margin=0.01, symmetric_margin_per_angstrom=8.0)
    a = [_cand(62, 0.30, 8, a=5.0, gen="a"), _cand(167, 0.85, 12, gen="a")]
    b = [_cand(167, 0.005, 12, a=7.1, gen="b"), _cand(62, 1.1, 8, gen="b")]
    pred = pool.choose(a + b)
    assert pred is not None and pred.as_tuple()[-1] == 167 and pred.as_tuple()[0] == pytest.approx(7.1)
    # within the margin the more symmetric template wins, whichever member made it
    near = [_cand(62, 0.010, 8, gen="a"), _cand(221, 0.015, 48, gen="b")]
    assert pool.choose(near).as_tuple()[-1] == 221
    assert pool.choose(near, noise_angstrom=0.0).as_tuple()[-1] == 221
    far = [_cand(62, 0.010, 8, gen="a"), _cand(221, 0.05, 48, gen="b")]
    assert pool.choose(far).as_tuple()[-1] == 62
    assert pool.choose(far, noise_angstrom=0.02).as_tuple()[-1] == 221     # margin 0.01 + 0.16
    # a candidate with atoms too close counts only when none is valid
    close = [_cand(62, 0.001, 8, min_pair=0.3, gen="a"), _cand(140, 0.2, 16, gen="b")]
    assert pool.choose(close).as_tuple()[-1] == 140
    assert pool.choose([]) is None


def test_pool_rejects_bad_members_and_rules() -> None:
    gen = load_generator(PRETRAINED / "diffcsp-inverse")
    with pytest.raises(C2NPInputError, match="at least two"):
        GeneratorPool([("diffcsp-inverse", gen)], PoolRule())
    with pytest.raises(C2NPInputError, match="repeat"):
        GeneratorPool([("x", gen), ("x", gen)], PoolRule())
    voter = load_generator(PRETRAINED / "flowmm-inverse")
    voter.cfg = dataclasses.replace(voter.cfg, rank="vote")
    with pytest.raises(C2NPInputError, match="votes"):
        GeneratorPool([("a", gen), ("b", voter)], PoolRule())
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(C2NPInputError, match="symmetric_margin"):
            PoolRule(symmetric_margin=bad)


def _copy_member(name: str, dst: Path) -> Path:
    shutil.copytree(PRETRAINED / name, dst)
    return dst


def test_pool_folder_round_trip_and_malformed_folders(tmp_path: Path) -> None:
    d, f = _copy_member("diffcsp-inverse", tmp_path / "d"), _copy_member("flowmm-inverse", tmp_path / "f")
    out = save_pool(tmp_path / "pool", [("d", d), ("f", f)], PoolRule(symmetric_margin=0.02),
                    member_configs={"d": {"crop_radii_angstrom": []}})
    pool = load_inverse_generator(out)
    assert isinstance(pool, GeneratorPool)
    assert [n for n, _ in pool.members] == ["d", "f"] and pool.rule.symmetric_margin == 0.02
    doc = json.loads((out / POOL_FILE).read_text())
    assert [m["path"] for m in doc["members"]] == ["../d", "../f"]       # named, never copied
    assert not (out / "members").exists()
    assert pool.members[0][1].cfg.crop_radii_angstrom == () and pool.members[1][1].cfg == load_generator(f).cfg
    assert isinstance(load_inverse_generator(PRETRAINED / "diffcsp-inverse"), CrystalGenerator)

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x").symlink_to(d)      # a link that leads out of the members root
    m0 = doc["members"][0]
    cases = [({**doc, "kind": "something else"}, "pool.json: kind: 'something else' is not one of"),
             ({**doc, "members": [m0, {"name": "../f", "path": "../f"}]}, "plain 'name'"),
             ({**doc, "members": "d"}, "pool.json: members: 'd' is not a list"),
             ({**doc, "members": [m0, {"name": "f", "path": str(f)}]}, "must be relative"),
             ({**doc, "members": [m0, {"name": "f", "path": "../../f"}]}, "leads outside"),
             ({**doc, "members": [m0, {"name": "f", "path": "../missing"}]}, "does not exist"),
             ({**doc, "members": [{**m0, "config": {"hidden": 8}}]}, "may not override"),
             ({**doc, "members": [{**m0, "config": {"no_such_field": 1}}]},
               r"pool.json: members\[0\].config: unexpected key\(s\) 'no_such_field'"),
             ({**doc, "members": [{**m0, "config": {"n_samples": "5"}}]},
               r"pool.json: members\[0\].config.n_samples: '5' is not an integer"),
             ({**doc, "rule": {"symmetric_margin": 0.1, "extra": 1}}, r"pool.json: rule: unexpected key\(s\) 'extra'"),
             ({**doc, "rule": {"symmetric_margin": -1}}, "pool.json: rule.symmetric_margin: -1 is below the minimum 0")]
    for bad, msg in cases:
        (out / POOL_FILE).write_text(json.dumps(bad))
        with pytest.raises(C2NPInputError, match=msg):
            load_pool(out)
    (out / POOL_FILE).write_text(json.dumps(doc))
    with pytest.raises(C2NPInputError, match="leads outside"):      # a narrower members root
        load_pool(out, members_root=tmp_path / "outside")
    # a member file that is a link out of its folder, or not a regular file, is refused
    (d / "templates.json").unlink()
    (d / "templates.json").symlink_to(f / "templates.json")
    with pytest.raises(C2NPInputError, match="leads outside"):
        load_pool(out)
    (d / "templates.json").unlink()
    (d / "templates.json").mkdir()
    with pytest.raises(C2NPInputError, match="not a regular file"):
        load_pool(out)
    (out / POOL_FILE).write_text("{not json")
    with pytest.raises(C2NPInputError, match="pool.json: the generator pool is not valid JSON"):
        load_pool(out)
    with pytest.raises(C2NPInputError, match="member name"):
        save_pool(tmp_path / "p2", [("../x", d), ("f", f)], PoolRule())


def test_first_layout_pool_folders_still_load(tmp_path: Path) -> None:
    """A pool folder of the first layout (byte copies under ``members/``) loads as before."""
    out = tmp_path / "old"
    for n in ("d", "f"):
        _copy_member("diffcsp-inverse" if n == "d" else "flowmm-inverse", out / "members" / n)
    (out / POOL_FILE).write_text(json.dumps({"kind": "c2np.generator_pool/1", "members": ["d", "f"],
                                             "rule": dataclasses.asdict(PoolRule())}))
    assert [n for n, _ in load_pool(out).members] == ["d", "f"]
    (out / POOL_FILE).write_text(json.dumps({"kind": "c2np.generator_pool/1", "members": ["d", "../f"],
                                             "rule": dataclasses.asdict(PoolRule())}))
    with pytest.raises(C2NPInputError, match="member folder names"):
        load_pool(out)


def test_shipped_pool_members_are_the_shipped_generators() -> None:
    """The pool names the shipped generator folders; it keeps the DiffCSP member without
    central crops (the setting its results were measured with), samples both members with 25
    steps, and sets nothing else."""
    pool = load_pool(SHIPPED)
    names = [n for n, _ in pool.members]
    assert names == ["diffcsp-inverse", "flowmm-inverse"]
    for n, gen in pool.members:
        own = load_generator(PRETRAINED / n)
        expected = dataclasses.replace(own.cfg, sample_steps=25)
        if n == "diffcsp-inverse":
            expected = dataclasses.replace(expected, crop_radii_angstrom=(), crop_max_noise_angstrom=None)
        assert own.cfg.sample_steps != 25 and gen.cfg == expected, n
        for k, v in own.state_dict().items():
            assert gen.state_dict()[k].equal(v), (n, k)
    assert sorted(p.name for p in SHIPPED.iterdir()) == ["README.md", "model.yml", "pool.json"]
