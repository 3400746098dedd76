"""The sampler ablations of the task-1 families (:mod:`c2np.models.forward.ablation`): each
switch removes the prior it names, and the default samples exactly as shipped."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from c2np.catalog import get_cell  # noqa: E402
from c2np.categories import name_with_priors  # noqa: E402
from c2np.models.forward import ARMS, SHIPPED, Ablation  # noqa: E402
from c2np.models.forward.ablation import ablated  # noqa: E402
from c2np.models.forward.sites import SiteAssignment  # noqa: E402
from c2np.models.overfit import gate_condition  # noqa: E402
from c2np.models.priors import forward_priors  # noqa: E402
from c2np.models.training import load_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
R = 6.0


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _run(family: str):
    return load_run(ROOT / "pretrained" / f"{family}-forward")[0]


def _sample(model, ablation: Ablation | None = None, *, steps: int = 10):
    cond = gate_condition(get_cell("KMgH3"), R, seed=0)[0]
    extra = {} if ablation is None else {"ablation": ablation}
    return model.sample([cond], torch.Generator().manual_seed(0), steps=steps, **extra)[0]


def _outside(p, margin: float = 0.5) -> int:
    return int(np.sum(np.linalg.norm(p.positions_angstrom, axis=1) > R + margin))


def _same(a, b) -> bool:
    return np.array_equal(a.numbers, b.numbers) and np.array_equal(a.positions_angstrom, b.positions_angstrom)


def _site_inputs(seed: int = 1):
    torch.manual_seed(seed)
    H, N, K, S = 16, 30, 3, 8
    sa = SiteAssignment(H, 0).eval()  # no exclusion rounds: the logits are the scores
    with torch.no_grad():
        for p in sa.parameters():
            p.add_(0.3 * torch.randn(p.shape))
    dist = torch.rand(N, S, K) * 3.0
    dist[:, 3:] = 1e3
    site_r = torch.randn(N, S, K)
    keys = torch.arange(N * S * K).view(N, S, K)
    return sa, dist, site_r, keys, torch.rand(N) + 0.5, H, N


def test_arms_differ_from_shipped_in_one_way_each():
    assert ARMS["shipped"] == SHIPPED == Ablation() and SHIPPED.is_shipped
    for name, arm in ARMS.items():
        changed = [f.name for f in dataclasses.fields(Ablation) if getattr(arm, f.name) != getattr(SHIPPED, f.name)]
        assert (name == "shipped") == (not changed), name


@pytest.mark.parametrize("family", ["mattergen", "cdvae", "adit", "diffcsp", "flowmm"])
def test_default_sampling_is_the_shipped_sampler_and_ablations_are_undone(family):
    model = _run(family)
    first = _sample(model)
    assert _same(first, _sample(model, SHIPPED))
    _sample(model, ARMS["sphere-penalty-off"])  # the switch holds for that call only
    assert _same(first, _sample(model))
    assert all(getattr(m, "ablation", SHIPPED) is SHIPPED for m in model.modules())


def test_ablated_sets_and_restores_every_site_head():
    model = _run("adit")
    heads = [m for m in model.modules() if isinstance(m, SiteAssignment)]
    assert heads
    off = ARMS["learned-correction-zeroed"]
    with ablated(model, off):
        assert all(m.ablation is off for m in heads)
    assert all(m.ablation is SHIPPED for m in heads)


def test_sphere_penalty_off_removes_only_the_outside_term():
    sa, dist, site_r, keys, sigma, H, N = _site_inputs()
    with torch.no_grad():
        on = sa.prepare(dist, site_r, keys, sigma, None)
        sa.ablation = ARMS["sphere-penalty-off"]
        off = sa.prepare(dist, site_r, keys, sigma, None)
    assert float(on.outside_term.max()) > 0
    assert float(off.outside_term.abs().max()) == 0.0
    assert torch.equal(on.noise_term, off.noise_term) and torch.equal(on.c_feat, off.c_feat)


def test_learned_correction_zeroed_leaves_the_analytic_scores():
    """With the learned term zeroed, the odds between two sites of one atom are those of the
    distance likelihood and the sphere penalty alone, whatever the atom's features."""
    sa, dist, site_r, keys, sigma, H, N = _site_inputs()
    x = sa.prepare(dist, site_r, keys, sigma, None)
    h1, h2 = torch.randn(N, H), torch.randn(N, H)
    with torch.no_grad():
        on1, on2 = sa.assign(h1, x)[0], sa.assign(h2, x)[0]
        sa.ablation = ARMS["learned-correction-zeroed"]
        off1, off2 = sa.assign(h1, x)[0], sa.assign(h2, x)[0]
    analytic = (-x.noise_term - x.outside_term)[:, :3]

    def log_odds(p):
        return torch.log(p[:, :3, 1:]) - torch.log(p[:, :3, :1])

    want = analytic[:, :, 1:] - analytic[:, :, :1]
    torch.testing.assert_close(log_odds(off1), want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(log_odds(off2), want, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(log_odds(on1), log_odds(on2), atol=1e-3)


def test_mattergen_sphere_penalty_off_puts_atoms_outside_r():
    model = _run("mattergen")
    assert _outside(_sample(model)) == 0
    assert _outside(_sample(model, ARMS["sphere-penalty-off"])) > 0


def test_mattergen_no_snapping_keeps_the_over_complete_count():
    from c2np.models.backbone import collate_conditions

    model = _run("mattergen")
    cond = gate_condition(get_cell("KMgH3"), R, seed=0)[0]
    c = collate_conditions([cond])
    with torch.no_grad():
        head = int(model.count_head.sample(c, model.conditioner(c))[0])
    want = math.ceil(head * (1.0 + model.cfg.sample_count_margin))
    snapped, free = _sample(model), _sample(model, ARMS["no-snapping"])
    assert free.n_atoms == want
    assert snapped.n_atoms < want  # the site filter dropped atoms


def test_cdvae_no_confinement_lets_atoms_leave_the_ball():
    model = _run("cdvae")
    lim = R * (1.0 + model.cfg.confine_margin) + 1e-6
    shipped = _sample(model)
    assert np.linalg.norm(shipped.positions_angstrom, axis=1).max() <= lim
    free = _sample(model, ARMS["no-snapping"])
    assert np.linalg.norm(free.positions_angstrom, axis=1).max() > lim


def test_adit_no_snapping_returns_the_decoded_positions():
    model = _run("adit")
    shipped, free = _sample(model), _sample(model, ARMS["no-snapping"])
    assert shipped.n_atoms == free.n_atoms
    assert not np.allclose(shipped.positions_angstrom, free.positions_angstrom)


@pytest.mark.parametrize("family", ["diffcsp", "flowmm"])
def test_snapping_switch_changes_nothing_without_a_snap(family):
    model = _run(family)
    assert _same(_sample(model), _sample(model, ARMS["no-snapping"]))


def test_shipped_forward_names_carry_their_priors():
    names = {}
    for family in ("mattergen", "cdvae", "diffcsp", "flowmm", "adit"):
        cfg = json.loads((ROOT / "pretrained" / f"{family}-forward" / "config.json").read_text())["config"]
        names[family] = name_with_priors(family, forward_priors(family, cfg))
    assert names == {"mattergen": "mattergen+sites+sphere+snap", "cdvae": "cdvae+sites+sphere",
                     "diffcsp": "diffcsp+sites+sphere", "flowmm": "flowmm+sites+sphere",
                     "adit": "adit+sites+sphere+snap"}
    assert forward_priors("adit", {"site_features": True, "exclusion_iters": 0}) == ()
