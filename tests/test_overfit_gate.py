"""The overfit gate: trained on ONE small particle, each paper family must reproduce it.
F1@0.5 comes from the harness's per-sample metric code (c2np.metrics.forward_metrics, through
c2np.models.overfit.overfit). The faithful configurations' gate (no prior, category learned)
is reproduce/faithful/gate.py.

Every family runs with the lattice-site assignment head on (``site_features``,
``exclusion_iters``: the `small` preset), the variant that the docs label "site-assignment".
A family that does not reach the gate inside the CI budget asserts the level it was measured
at (CI_GATE's third column, below GATE_F1) so that a regression still fails; it is reported
as not passing, never skipped.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from c2np.catalog import get_cell  # noqa: E402
from c2np.models.overfit import GATE_F1, gate_condition, gate_config, overfit  # noqa: E402

# CI size: KMgH3 of the shipped catalog at R = 4.5 Å (21 atoms), a seeded rotation
GATE_RADIUS_ANGSTROM = 4.5
# family: (optimiser steps, config overrides, F1@0.5 the mean over 4 samples must reach)
CI_GATE: dict[str, tuple[int, dict[str, object], float]] = {
    "diffcsp": (1000, {}, GATE_F1),     # measured 0.929
    "cdvae": (1000, {}, GATE_F1),       # measured 0.917
    "flowmm": (1500, {}, GATE_F1),      # measured 0.905
    "mattergen": (1000, {}, GATE_F1),   # measured 0.952 (8 samples: 0.946)
    "adit": (2000, {}, GATE_F1),        # measured 0.976 (8 samples: 0.964; latent corrector)
}


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.mark.parametrize("name", list(CI_GATE))
def test_family_overfits_one_particle(name):
    steps, overrides, floor = CI_GATE[name]
    cond, target = gate_condition(get_cell("KMgH3"), GATE_RADIUS_ANGSTROM)
    cfg = gate_config(name, "small", hidden=48, **overrides)
    assert cfg.site_features and cfg.exclusion_iters > 0  # the site-assignment variant
    r = overfit(name, cfg, cond, target, steps=steps, n_samples=4)
    assert len(r.f1) == 4 and np.all(np.isfinite(r.losses))
    assert all(abs(e) < 0.05 for e in r.count_error), r.count_error  # the count head learns the size
    assert r.f1_mean >= floor, (name, r.f1, r.count_error)

