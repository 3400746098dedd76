"""The space-group condition of a crystal generator (GenConfig.spacegroups; DiffCSP++-style,
decision record 0071): the training pairs carry their group, the condition
starts as the unconditioned network, changes what is sampled once trained, survives a save
and load, and a warm start from unconditioned weights is accepted only for that embedding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from c2np.carving import carve
from c2np.errors import C2NPInputError
from c2np.models.inverse.config import GenConfig
from c2np.models.inverse.examples import cell_example
from c2np.models.inverse.generator import CrystalGenerator
from c2np.models.inverse.io import load_generator, save_generator
from c2np.models.inverse.templates import template_of
from c2np.models.inverse.training import fit_generator, load_init_state
from c2np.particle_descriptor import describe
from helpers import crystal_zoo, perovskite


def _model(cfg: GenConfig, ex):
    n = len(CrystalGenerator.features([ex.descriptor])[0])
    torch.manual_seed(0)
    return CrystalGenerator(cfg, n, [tuple(int((ex.slots == k).sum()) for k in range(3))], np.zeros(n), np.ones(n),
                            ex.lattice_angstrom / ex.descriptor.scale_angstrom, 0.05)


@pytest.fixture(scope="module")
def pnma_example():
    cell = crystal_zoo()["orthorhombic"]                    # NaMgH3, Pnma
    return cell_example(describe(carve(cell, 9.0).particle), cell)


def test_training_pairs_carry_their_space_group(pnma_example) -> None:
    assert pnma_example.spacegroup == 62
    cube = perovskite()
    assert cell_example(describe(carve(cube, 8.0).particle), cube).spacegroup == 221


def test_bad_spacegroups_are_refused() -> None:
    for bad in ((0,), (231,), (62, 62)):
        with pytest.raises(C2NPInputError, match="spacegroups"):
            GenConfig(spacegroups=bad)
    with pytest.raises(C2NPInputError, match="spacegroup_drop_fraction"):
        GenConfig(spacegroups=(62,), spacegroup_drop_fraction=1.0)
    assert GenConfig(spacegroups=[221, 62]).spacegroups == (221, 62)     # a JSON list is kept as a tuple


def test_condition_starts_as_the_unconditioned_network_and_then_steers(pnma_example) -> None:
    ex = pnma_example
    t = template_of(ex.lattice_angstrom, ex.frac, ex.slots, "NaMgH3")
    base_cfg = GenConfig(hidden=16, layers=1, steps=10, train_steps=0, pair_readout=True)
    base = _model(base_cfg, ex)
    cond = _model(GenConfig(**{**base_cfg.__dict__, "spacegroups": (62, 221)}), ex)
    load_init_state(cond, base.state_dict())                # warm start: only the embedding is new
    feats = torch.as_tensor(base.features([ex.descriptor]))

    def draw(m):
        (xl, fr, _), = m.sample(feats, [t.composition], torch.Generator().manual_seed(3), t)
        return xl, fr

    for a, b in zip(draw(base), draw(cond)):                 # zero embedding: the same cells, bit for bit
        np.testing.assert_array_equal(a, b)
    assert cond.spacegroup_index(62) == 1 and cond.spacegroup_index(221) == 2 and cond.spacegroup_index(167) == 0
    with torch.no_grad():
        cond.sg_embed.weight[1] += 1.0                      # a trained (non-zero) row for group 62
    xl_c, _ = draw(cond)
    assert not np.allclose(xl_c, draw(base)[0])             # the template's group now steers the sample


def test_save_load_round_trip_keeps_the_condition(pnma_example, tmp_path) -> None:
    ex = pnma_example
    m = _model(GenConfig(hidden=16, layers=1, steps=10, train_steps=0, spacegroups=(62,)), ex)
    with torch.no_grad():
        m.sg_embed.weight.normal_()
    save_generator(m, tmp_path / "g", [])
    back = load_generator(tmp_path / "g")
    assert back.cfg.spacegroups == (62,)
    torch.testing.assert_close(back.sg_embed.weight, m.sg_embed.weight)


def test_warm_start_refuses_other_mismatches(pnma_example) -> None:
    ex = pnma_example
    cond = _model(GenConfig(hidden=16, layers=1, steps=10, train_steps=0, spacegroups=(62,)), ex)
    plain = _model(GenConfig(hidden=16, layers=1, steps=10, train_steps=0), ex)
    with pytest.raises(C2NPInputError, match="sg_embed"):   # a conditioned state into a plain model
        load_init_state(plain, cond.state_dict())
    state = dict(plain.state_dict())
    state.pop(next(k for k in state if k.startswith("comp_head")))
    with pytest.raises(C2NPInputError, match="comp_head"):
        load_init_state(cond, state)


def test_fit_trains_the_embedding_of_the_training_group(pnma_example) -> None:
    ex = pnma_example
    cfg = GenConfig(hidden=16, layers=1, steps=10, train_steps=5, batch=4, spacegroups=(62, 221),
                    spacegroup_drop_fraction=0.0)
    m = fit_generator([ex, ex], cfg)
    w = m.sg_embed.weight.detach()
    assert torch.count_nonzero(w[1]) > 0                    # group 62 (the training cell's) moved
    assert torch.count_nonzero(w[2]) == 0 and torch.count_nonzero(w[0]) == 0   # unseen rows stay at zero
