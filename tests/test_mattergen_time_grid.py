"""The sampler's time grid (``sample_times``; ``sample_time_power`` / ``sample_eps_t``,
docs/decisions/0034-mattergen-power-time-grid.md): the
default is the uniform grid, the power grid is monotone, ends with eps_t then 0, and is finer
near t = 0; MatterGen's sampler follows the configured grid and stays seeded."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from c2np.catalog import get_cell  # noqa: E402
from c2np.models.forward.noise import sample_times  # noqa: E402
from c2np.models.overfit import gate_condition  # noqa: E402


def test_default_grid_is_the_uniform_grid():
    g = torch.Generator()
    for n in (1, 7, 100):
        assert torch.equal(sample_times(n, g), torch.linspace(1.0, 0.0, n + 1))


@pytest.mark.parametrize("power,eps_t", [(2.0, 1e-3), (3.0, 1e-3), (2.0, 0.0), (1.0, 1e-3)])
def test_power_grid_is_monotone_ends_at_eps_then_zero_and_is_finer_near_zero(power, eps_t):
    n = 100
    ts = sample_times(n, torch.Generator(), power=power, eps_t=eps_t).double()
    assert ts.shape == (n + 1,)
    assert float(ts[0]) == pytest.approx(1.0) and float(ts[-1]) == 0.0
    assert float(ts[-2]) == pytest.approx(eps_t + (1 - eps_t) * n ** -power, rel=1e-4, abs=1e-7)
    steps = (ts[:-2] - ts[1:-1]).numpy()  # the spacings before the final step to 0
    assert (steps > 0).all()
    if power > 1:
        # finer near t = 0: spacings shrink monotonically towards the end, the last one far
        # below the uniform grid's 1 / n, and more steps below t = 0.2 than the uniform grid
        assert (np.diff(steps) < 1e-9).all()
        assert steps[-1] < 0.1 / n
        assert int((ts < 0.2).sum()) > int((torch.linspace(1.0, 0.0, n + 1) < 0.2).sum())


@pytest.mark.parametrize("kw", [dict(power=0.0), dict(eps_t=1.0), dict(eps_t=-0.1)])
def test_bad_grid_parameters_are_refused(kw):
    with pytest.raises(ValueError, match="sample_times"):
        sample_times(10, torch.Generator(), **kw)
    with pytest.raises(ValueError, match="sample_times"):
        sample_times(0, torch.Generator())


def test_mattergen_sampler_follows_the_grid_and_is_seeded():
    from c2np.models.training import load_run

    model, _ = load_run(Path(__file__).resolve().parents[1] / "pretrained" / "mattergen-forward")
    conds = [gate_condition(get_cell("KMgH3"), 5.0, seed=0)[0]]

    def draw(power: float, eps_t: float, seed: int):
        model.cfg = dataclasses.replace(model.cfg, sample_time_power=power, sample_eps_t=eps_t)
        with torch.no_grad():
            p = model.sample(conds, torch.Generator().manual_seed(seed), steps=8)[0]
        return p.numbers, p.positions_angstrom

    a, b = draw(2.0, 1e-3, 5), draw(2.0, 1e-3, 5)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    uniform = draw(1.0, 0.0, 5)
    assert len(uniform[0]) != len(a[0]) or not np.allclose(uniform[1], a[1])


def test_config_refuses_out_of_range_sampler_settings() -> None:
    """A run folder's config.json with a bad grid or margin is refused on load, naming the key."""
    from c2np.errors import C2NPInputError
    from c2np.models.config import ModelConfig

    base = ModelConfig().to_dict()
    for key, value in [("sample_time_power", 0.0), ("sample_eps_t", 1.0), ("sample_count_margin", -0.1)]:
        with pytest.raises(C2NPInputError, match=key):
            ModelConfig.from_dict({**base, key: value})
    assert ModelConfig.from_dict({**base, "sample_time_power": 2.0, "sample_eps_t": 1e-3}).sample_time_power == 2.0
