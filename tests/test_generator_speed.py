"""Batched sampling of the task-2 crystal generators: the cached template projection and the
compiled pair profiles compute what the plain NumPy code computes; template blocks project each
block onto its own template; generators and pools run on the chosen device (``auto`` is the CPU
without a GPU) and the progress bar counts particles."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from c2np.cli import build_app
from c2np.models.inverse.templates import (
    TemplateBlocks,
    load_templates,
    project_frac,
    project_frac_template,
    project_lattice,
)
from c2np.store import build_store
from helpers import cheap_generator_copy, perovskite

PRETRAINED = Path(__file__).resolve().parents[1] / "pretrained"
runner = CliRunner()
app = build_app()


def test_cached_template_projection_is_the_plain_one_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    templates = load_templates(PRETRAINED / "diffcsp-inverse")
    assert templates
    for t in templates:
        frac = rng.random((5, len(t.slots), 3)).astype(np.float32)
        want = project_frac(frac, t.rotations, t.translations, t.perm, t.frac)
        got = project_frac_template(frac, t)
        assert np.array_equal(got, want)
        near = (t.frac + rng.normal(scale=0.01, size=t.frac.shape)) % 1.0     # the projection is one
        once = project_frac_template(near, t)
        assert np.abs((project_frac_template(once, t) - once + 0.5) % 1.0 - 0.5).max() < 1e-9


def _binned_numpy(dist: np.ndarray, pair_index: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The profile binning written out in NumPy (every bin, no reach)."""
    from c2np.models.inverse.ranking import PROFILE_BINS, PROFILE_CUTOFF_SCALED, PROFILE_SMOOTH_SCALED
    from c2np.particle_descriptor import slot_pairs

    centres = (np.arange(PROFILE_BINS) + 0.5) * (PROFILE_CUTOFF_SCALED / PROFILE_BINS)
    width = PROFILE_CUTOFF_SCALED / PROFILE_BINS
    out = np.zeros((len(slot_pairs()), PROFILE_BINS))
    for k in range(len(slot_pairs())):
        sel = pair_index == k
        z = (centres[None, :] - dist[sel][:, None]) / PROFILE_SMOOTH_SCALED
        out[k] = (weight[sel][:, None] * np.exp(-0.5 * z * z)).sum(0) * width / (
            PROFILE_SMOOTH_SCALED * np.sqrt(2 * np.pi))
    return out


def test_compiled_pair_profiles_match_numpy() -> None:
    from c2np.models.inverse import ranking
    from c2np.particle_descriptor import slot_pairs

    rng = np.random.default_rng(0)
    dist = rng.uniform(0.0, 2.5, 4000)
    idx = rng.integers(0, len(slot_pairs()), 4000)
    w = rng.uniform(0.1, 1.0, 4000)
    np.testing.assert_allclose(ranking._binned(dist, idx, w), _binned_numpy(dist, idx, w), rtol=1e-9, atol=1e-12)
    # the cell's neighbour pairs: every image within the cut-off, none at distance 0
    lat = np.array([[3.9, 0.1, 0.0], [0.0, 4.1, 0.2], [0.3, 0.0, 4.0]])
    frac = rng.random((5, 3))
    slots = np.array([0, 1, 2, 2, 2])
    r, k = ranking._cell_pairs(lat, frac, slots, 2.0)
    shifts = np.array(list(itertools.product(range(-4, 5), repeat=3)), dtype=float)
    d = np.linalg.norm((frac[None, :, None] - frac[:, None, None] + shifts) @ lat, axis=-1)
    cut = (ranking.PROFILE_CUTOFF_SCALED + 4 * ranking.PROFILE_SMOOTH_SCALED) * 2.0
    keep = (d <= cut) & (d > 2e-9)
    i, j, _ = np.nonzero(keep)
    assert np.allclose(np.sort(r), np.sort(d[keep] / 2.0))
    want = _binned_numpy(d[keep] / 2.0, ranking._pair_index(slots[i], slots[j]), np.full(keep.sum(), 0.1))
    np.testing.assert_allclose(ranking._binned(r, k, np.full(len(r), 0.1)), want, rtol=1e-9, atol=1e-12)


def test_template_blocks_project_each_block_onto_its_template() -> None:
    from c2np.models.inverse.io import load_generator

    gen = load_generator(PRETRAINED / "flowmm-inverse")
    same = [t for t in gen.templates if t.composition == (6, 2, 2)]
    assert len(same) >= 2
    blocks = TemplateBlocks((same[0], same[1]), (0, 2, 5))
    g = torch.Generator().manual_seed(0)
    x_l, f = torch.randn(5, 3, 3, generator=g), torch.rand(5, 10, 3, generator=g)
    xb, fb = gen.project(x_l, f, blocks)
    for t, a, b in blocks.blocks():
        xs, fs = gen.project(x_l[a:b], f[a:b], t)
        assert torch.equal(xb[a:b], xs) and torch.equal(fb[a:b], fs)
    mu, sd = gen.lat_mean.numpy().astype(np.float64), float(gen.lat_std)
    np.testing.assert_allclose(xb[:2].numpy() * sd + mu,
                               project_lattice(x_l[:2].numpy().astype(np.float64) * sd + mu, same[0].rotations),
                               atol=1e-5)
    with pytest.raises(Exception, match="same composition"):
        TemplateBlocks((same[0], next(t for t in gen.templates if t.composition != (6, 2, 2))), (0, 1, 2))


def _cheap_copy(name: str, dst: Path) -> Path:
    # two templates of one composition, one of another
    return cheap_generator_copy(name, dst, n_samples=2, sample_steps=8, refine_evals=5, every_template=True)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cells = [perovskite(a=a, ids=f"M{i}", A=z) for i, (a, z) in enumerate(zip((3.4, 4.0, 4.6, 5.2, 5.8),
                                                                              (19, 11, 37, 55, 3)))]
    return build_store(cells, tmp_path_factory.mktemp("g") / "strict.h5", "strict", radii_angstrom=[6],
                       progress=False)


def test_generators_run_on_the_chosen_device_and_count_particles(store_path: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from c2np.models.inverse.pool import PoolRule, load_inverse_generator, save_pool
    from c2np.models.inverse.predict import place_generator, predict_generator
    from c2np.store import DatasetStore

    gen_dir = _cheap_copy("mattergen-inverse", tmp_path / "mattergen")
    pool_dir = save_pool(tmp_path / "pool", [("m", gen_dir), ("d", _cheap_copy("diffcsp-inverse", tmp_path / "d"))],
                         PoolRule())
    want = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    for folder in (gen_dir, pool_dir):
        gen = load_inverse_generator(folder)
        assert place_generator(gen, "auto") == want
        members = [m for _, m in gen.members] if hasattr(gen, "members") else [gen]
        seen: set[torch.device] = set()

        def record(_: object, args: tuple[torch.Tensor, ...], seen: set[torch.device] = seen) -> None:
            seen.update(a.device for a in args)

        for m in members:
            assert {p.device for p in m.parameters()} | {b.device for b in m.buffers()} == {want}
            m.net.register_forward_pre_hook(record)
        store = DatasetStore.open(store_path)
        from c2np.models.training import query_items

        particles = [p for _, p in query_items(store, "heldout", forward=False)[:3]]
        answers = gen.predict_particles(particles, seed=1)
        assert len(answers) == 3 and seen == {want}
    capsys.readouterr()
    res = predict_generator(gen_dir, DatasetStore.open(store_path), "heldout", tmp_path / "p.csv", device="auto")
    err = capsys.readouterr().err
    assert res["device"] == str(want) and f"/{res['n_samples']}" in err and "particle" in err


def test_a_first_compile_of_the_profile_kernels_is_announced(store_path: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """One line while numba's cache lacks the pair-profile kernels, none once it holds them."""
    from c2np.models.inverse.predict import predict_generator
    from c2np.store import DatasetStore

    gen_dir = _cheap_copy("flowmm-inverse", tmp_path / "flowmm")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cold"))
    (tmp_path / "cold").mkdir()
    predict_generator(gen_dir, DatasetStore.open(store_path), "heldout", tmp_path / "p.csv", per_group=1)
    notices = [ln for ln in capsys.readouterr().err.splitlines() if "compiling the pair-profile kernels" in ln]
    assert len(notices) == 1
    (tmp_path / "cold" / "x").mkdir()
    (tmp_path / "cold" / "x" / "_profile_kernels.binned_kernel-20.py311.nbi").write_bytes(b"")
    predict_generator(gen_dir, DatasetStore.open(store_path), "heldout", tmp_path / "q.csv", per_group=1)
    assert "compiling" not in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_device_cuda_without_a_gpu_is_one_line_exit_2(store_path: Path, tmp_path: Path) -> None:
    gen = _cheap_copy("mattergen-inverse", tmp_path / "mattergen")
    r = runner.invoke(app, ["predict", "--run", str(gen), "--store", str(store_path), "--split", "heldout",
                            "-o", str(tmp_path / "x.csv"), "--device", "cuda"])
    assert r.exit_code == 2 and "Traceback" not in r.output and "no CUDA device" in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()


def _denoiser_written_out(net, x_l, f, slot, mask, t_emb, cond):
    """The task-2 denoiser's forward pass with every message formed per edge (the straight
    reading of the architecture: concatenated edge features, the two-layer edge MLP applied
    to every edge, then summed), for comparison with the factored one."""
    import math

    from c2np.models.backbone import periodic_features

    B, N = slot.shape
    c = cond + net.time(t_emb)
    h = net.slot(slot) + c[:, None, :]
    gram = (x_l @ x_l.transpose(1, 2)).reshape(B, 1, 1, 9).expand(B, N, N, 9)
    e = torch.cat([gram, periodic_features(f[:, None, :, :] - f[:, :, None, :], net.n_freq)], dim=-1)
    pm = (mask[:, :, None] & mask[:, None, :]).float()[..., None]
    deg = pm.sum(dim=2).clamp(min=1.0)
    m = h.new_zeros(B, N, N, h.shape[-1])
    for edge, node, norm in zip(net.edge, net.node, net.norm):
        x = edge.src(h)[:, :, None, :] + edge.dst(h)[:, None, :, :] + edge.edge(e)
        m = edge.out(torch.nn.functional.silu(x)) * pm
        h = norm(h + node(torch.cat([h, m.sum(dim=2) / deg], dim=-1))) * mask[..., None].float()
    pooled = (h * mask[..., None].float()).sum(1) / mask.float().sum(1, keepdim=True).clamp(min=1)
    out_l = net.out_l(torch.cat([pooled, c, x_l.reshape(B, 9)], dim=-1)).reshape(B, 3, 3)
    out_f = net.out_f(h)
    K = net.n_pair_freq
    if K:
        k = torch.arange(1, K + 1, dtype=f.dtype) * (2 * math.pi)
        sin = torch.sin((f[:, None, :, :] - f[:, :, None, :])[..., None] * k)
        out_f = out_f + (net.pair_f(m).reshape(B, N, N, 3, K) * sin).sum(-1).mul(pm).sum(2) / deg
    return out_l, out_f


@pytest.mark.parametrize(("pair", "layers"), [(True, 3), (False, 3), (True, 0)])
def test_factored_denoiser_is_the_written_out_network(pair: bool, layers: int) -> None:
    """Node and cell parts of the first edge layer computed per node, the second layer after
    the neighbour sum, the pair read-out through one composed linear map: the same outputs and
    the same gradients as the per-edge network, padded cells included."""
    from c2np.models.inverse.config import GenConfig
    from c2np.models.inverse.network import Denoiser

    torch.manual_seed(1)
    net = Denoiser(GenConfig(hidden=24, layers=layers, n_freq=4, pair_readout=pair), n_desc=7).double()
    B, N = 5, 7
    x_l, f = torch.randn(B, 3, 3, dtype=torch.float64), torch.rand(B, N, 3, dtype=torch.float64)
    slot = torch.randint(0, 3, (B, N))
    mask = torch.ones(B, N, dtype=torch.bool)
    mask[1, 4:] = False
    mask[3, 6:] = False
    t_emb, cond = torch.randn(B, 24, dtype=torch.float64), torch.randn(B, 24, dtype=torch.float64)
    with torch.no_grad():
        got = net(x_l, f, slot, mask, t_emb, cond)[:2]
    want = _denoiser_written_out(net, x_l, f, slot, mask, t_emb, cond)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    grads = []
    for fn in (lambda: net(x_l, f, slot, mask, t_emb, cond)[:2],
               lambda: _denoiser_written_out(net, x_l, f, slot, mask, t_emb, cond)):
        net.zero_grad()
        out_l, out_f = fn()
        (out_l.square().sum() + (out_f * mask[..., None]).sin().sum()).backward()
        grads.append([p.grad.clone() for p in net.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 5
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_one_pass_cell_profile_is_the_binned_pair_list() -> None:
    """The one-pass cell profile (pairs binned as they are found, far translations skipped)
    equals the pair list binned afterwards, bit for bit, for cells of 1-20 atoms, skewed
    lattices included; degenerate lattices give no profile."""
    from c2np.models.inverse import ranking

    rng = np.random.default_rng(5)
    for _ in range(60):
        n = int(rng.integers(1, 21))
        lat = np.diag(rng.uniform(2.5, 9.0, 3)) + rng.normal(scale=1.0, size=(3, 3))
        frac, slots, scale = rng.random((n, 3)) * 3 - 1, rng.integers(0, 3, n), float(rng.uniform(2.0, 4.0))
        pairs = ranking._cell_pairs(lat, frac, slots, scale)
        got = ranking.cell_pair_profile(lat, frac, slots, scale)
        if pairs is None:
            assert got is None
            continue
        want = ranking._binned(pairs[0], pairs[1], np.full(len(pairs[0]), 0.5 / n))
        assert got is not None and np.array_equal(got, want)
        if n <= 6:      # every pair within the cut-off, against all translations up to 6 cells away
            shifts = np.array(list(itertools.product(range(-6, 7), repeat=3)), dtype=float)
            f = frac % 1.0
            d = np.linalg.norm((f[None, :, None] - f[:, None, None] + shifts) @ lat, axis=-1)
            cut = (ranking.PROFILE_CUTOFF_SCALED + 4 * ranking.PROFILE_SMOOTH_SCALED) * scale
            assert np.allclose(np.sort(pairs[0]), np.sort(d[(d <= cut) & (d > 1e-9 * scale)] / scale))
        assert got.sum() > 0 or len(pairs[0]) == 0
    assert ranking.cell_pair_profile(np.zeros((3, 3)), np.zeros((2, 3)), np.zeros(2, dtype=np.int64), 3.0) is None
