"""MatterGen's site-decided count (docs/decisions/0033-mattergen-site-decided-count.md):
``keep_sited`` keeps one atom per lattice site of its own species and drops the rest, and a
sampler with ``sample_count_margin`` / ``sample_site_tol_angstrom`` returns particles whose
atoms sit on distinct sites of their species."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from c2np.carving import carve  # noqa: E402
from c2np.catalog import get_cell  # noqa: E402
from c2np.models.backbone import collate_conditions  # noqa: E402
from c2np.models.data import species_slots  # noqa: E402
from c2np.models.forward.sites import keep_sited  # noqa: E402
from c2np.models.overfit import gate_condition  # noqa: E402


def _site_particle(material: str, R: float, seed: int):
    cond, target = gate_condition(get_cell(material), R, seed=seed)
    slots = np.searchsorted(species_slots(cond.cell), target.numbers)
    return cond, target, slots


def test_keep_sited_drops_doubles_off_site_and_wrong_species_atoms():
    (ca, ta, sa), (cb, tb, sb) = _site_particle("KMgH3", 5.0, 0), _site_particle("RbSrH3", 6.0, 1)
    c = collate_conditions([ca, cb])
    rng = np.random.default_rng(0)
    xa = ta.positions_angstrom + rng.normal(0, 0.05, ta.positions_angstrom.shape)
    # sample a: a double (atom 0 again, 0.2 Å away), an atom between sites, and atom 1 given
    # another species slot (its own site is then not one of that species)
    same = carve(ca.cell, 8.0, quaternion=ca.quaternion).particle
    same_x = same.positions_angstrom[same.numbers == ta.numbers[0]]
    trial = ta.positions_angstrom[0] + rng.uniform(-2.0, 2.0, (200, 3))
    mid = trial[np.argmax(np.linalg.norm(trial[:, None] - same_x[None], axis=-1).min(1))]  # between sites
    assert np.linalg.norm(same_x - mid, axis=1).min() > 0.8
    xa = np.vstack([xa, ta.positions_angstrom[0] + 0.2, mid])
    ta_types = np.concatenate([sa, [sa[0], sa[0]]])
    ta_types[1] = (sa[1] + 1) % len(species_slots(ca.cell))
    xb = tb.positions_angstrom
    pos = np.vstack([xa, xb])
    u = torch.as_tensor(pos / np.repeat([5.0, 6.0], [len(xa), len(xb)])[:, None], dtype=torch.float32)
    types = torch.as_tensor(np.concatenate([ta_types, sb]))
    counts = torch.tensor([len(xa), len(xb)])
    ku, kt, kc = keep_sited(u, types, counts, c, tol_angstrom=0.5)
    # a: the double and the stray atom go, and so does the relabelled atom 1 (unless its new
    # species also has a site within 0.5 Å, which this geometry does not have)
    assert kc.tolist() == [ta.n_atoms - 1, tb.n_atoms]
    kept_a = ku[: int(kc[0])].numpy() * 5.0
    d = np.linalg.norm(kept_a[:, None] - ta.positions_angstrom[None], axis=-1).min(1)
    assert d.max() < 0.3
    assert len(ku) == len(kt) == int(kc.sum())
    # nothing to drop: unchanged
    same = keep_sited(u[len(xa):] * 1.0, types[len(xa):], counts[1:], collate_conditions([cb]), tol_angstrom=0.5)
    assert same[2].tolist() == [tb.n_atoms]


def test_sampler_with_site_decided_count_returns_distinct_sited_atoms():
    from c2np.models.training import load_run

    model, _ = load_run(Path(__file__).resolve().parents[1] / "pretrained" / "mattergen-forward")
    # the shipped sampler decides the count by the site assignment (docs/decisions/0033-mattergen-site-decided-count.md)
    assert model.cfg.sample_count_margin == 0.2 and model.cfg.sample_site_tol_angstrom == 0.5
    # and samples on the power time grid (docs/decisions/0034-mattergen-power-time-grid.md)
    assert model.cfg.sample_time_power == 2.0 and model.cfg.sample_eps_t == 1e-3
    conds = [_site_particle("KMgH3", 5.0, 0)[0], _site_particle("RbSrH3", 6.0, 1)[0]]
    with torch.no_grad():
        head = model.count_head.sample(collate_conditions(conds)).tolist()
        model.cfg = dataclasses.replace(model.cfg, sample_count_margin=0.2)
        got = model.sample(conds, torch.Generator().manual_seed(3), steps=20)
        model.cfg = dataclasses.replace(model.cfg, sample_count_margin=0.0, sample_site_tol_angstrom=0.0)
        plain = model.sample(conds, torch.Generator().manual_seed(3), steps=20)
    assert [p.n_atoms for p in plain] == head
    for p, cond, n in zip(got, conds, head, strict=True):
        assert 0.5 * n < p.n_atoms <= int(np.ceil(1.2 * n))
        # every kept atom within 0.5 Å of a site of its species, no two on one site
        sites = carve(cond.cell, cond.radius_angstrom + 3.0, quaternion=cond.quaternion).particle
        for z in np.unique(p.numbers):
            x = p.positions_angstrom[p.numbers == z]
            d = np.linalg.norm(x[:, None] - sites.positions_angstrom[sites.numbers == z][None], axis=-1)
            assert d.min(1).max() < 0.5
            assert len(set(d.argmin(1).tolist())) == len(x)
