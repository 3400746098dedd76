"""The faster training step computes exactly what the step before it
did: the lattice-site search equals its previous formulation (vectors, distances, keys and
gradients, bit for bit), the per-sample attention equals one padded batched call (outputs
and gradients of the real tokens), and sharing the state's denoiser features between the
self-conditioning pass and the main pass gives the loss and gradients of computing them
twice."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from c2np.catalog import get_cell  # noqa: E402
from c2np.models.backbone import (  # noqa: E402
    ConditionBatch,
    _image_shifts,
    collate_conditions,
    collate_particles,
    lattice_site_vectors,
    padded_attention,
    to_padded,
)
from c2np.models.config import get_config  # noqa: E402
from c2np.models.forward import CDVAE, DiffCSP, FlowMM, MatterGen  # noqa: E402
from c2np.models.overfit import gate_condition  # noqa: E402


def _reference_lattice_site_vectors(pos, batch, c: ConditionBatch, k=1, *, with_keys=False):
    """:func:`lattice_site_vectors` in its earlier form (one padded batch, keys of
    every candidate), the formulation the faster one must reproduce."""
    S_full = c.slots_z.shape[1]
    S_ = max(1, int(c.slot_mask.sum(1).max()))
    frac = torch.einsum("nd,ndk->nk", pos, c.inv_lattice_rot[batch]) + c.centre_frac[batch]
    nb = torch.bincount(c.basis_batch, minlength=c.size)
    bfrac, bmask = to_padded(c.basis_frac, c.basis_batch, nb)
    bslot = (c.basis_z.unsqueeze(-1) == c.slots_z[c.basis_batch]).float().argmax(-1)
    bslot_p, _ = to_padded(bslot.unsqueeze(-1), c.basis_batch, nb)
    diff = bfrac[batch] - frac.unsqueeze(1)
    rounded = torch.round(diff)
    diff = diff - rounded
    lat = c.lattice_rot[batch]
    shifts = _image_shifts(pos.device, pos.dtype)
    cand = diff.unsqueeze(2) + shifts
    disp = torch.einsum("nmik,nkd->nmid", cand, lat).flatten(1, 2)
    d = disp.norm(dim=-1)
    valid = bmask[batch].repeat_interleave(27, dim=1)
    slot_of = bslot_p[batch].squeeze(-1).repeat_interleave(27, dim=1)
    onehot = (slot_of.unsqueeze(-1) == torch.arange(S_)) & valid.unsqueeze(-1)
    d_slot = torch.where(onehot, d.unsqueeze(-1), torch.full_like(d, 1e3).unsqueeze(-1)).transpose(1, 2)
    kk = min(int(k), d_slot.shape[-1])
    dmin, idx = torch.topk(d_slot, kk, dim=-1, largest=False)
    vec = torch.gather(disp.unsqueeze(1).expand(-1, S_, -1, -1), 2, idx.unsqueeze(-1).expand(-1, -1, -1, 3))
    vec = torch.where((dmin < 1e3).unsqueeze(-1), vec, torch.zeros_like(vec))
    pad = S_full - S_
    if pad:
        vec = F.pad(vec, (0, 0, 0, 0, 0, pad))
        dmin = F.pad(dmin, (0, 0, 0, pad), value=1e3)
    if not with_keys:
        return vec, dmin
    m = bfrac.shape[1]
    trans = (shifts.unsqueeze(0).unsqueeze(0) - rounded.unsqueeze(2)).long() + 2048
    base = batch.view(-1, 1, 1) * m + torch.arange(m).view(1, -1, 1)
    key = ((base * 4096 + trans[..., 0]) * 4096 + trans[..., 1]) * 4096 + trans[..., 2]
    key = torch.gather(key.flatten(1).unsqueeze(1).expand(-1, S_, -1), 2, idx)
    if pad:
        key = F.pad(key, (0, 0, 0, pad), value=-1)
    return vec, dmin, key


def _batch(materials_radii, *, seed=0):
    conds, parts = zip(*[gate_condition(get_cell(m), r, seed=seed + i) for i, (m, r) in enumerate(materials_radii)],
                       strict=True)
    return list(conds), list(parts)


# cells of 5 (cubic), 20 and 2-3 species; a batch pads the basis and the slots
MIXED = [("KMgH3", 6.0), ("RbSrH3", 5.0), ("LiBeH3", 4.5), ("KMgH3", 4.0)]


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("noise", [0.0, 0.4, 3.0])
def test_lattice_site_vectors_equal_the_padded_formulation(k, noise):
    conds, parts = _batch(MIXED)
    c = collate_conditions(conds)
    p = collate_particles(parts, conds)
    g = torch.Generator().manual_seed(1)
    pos = p.pos + noise * torch.randn(p.pos.shape, generator=g)
    got = lattice_site_vectors(pos, p.batch, c, k, with_keys=True)
    want = _reference_lattice_site_vectors(pos, p.batch, c, k, with_keys=True)
    for x, y in zip(got, want, strict=True):
        assert x.shape == y.shape and torch.equal(x, y)
    # atoms not grouped by sample give every atom its own answer
    perm = torch.randperm(len(pos), generator=g)
    for x, y in zip(lattice_site_vectors(pos[perm], p.batch[perm], c, k, with_keys=True), want, strict=True):
        assert torch.equal(x, y[perm])
    # the comparison can fail: other positions give other sites
    assert not torch.equal(lattice_site_vectors(pos + 0.7, p.batch, c, k)[0], want[0])


def test_lattice_site_vector_gradients_equal_the_padded_formulation():
    conds, parts = _batch(MIXED, seed=5)
    c = collate_conditions(conds)
    p = collate_particles(parts, conds)
    w = torch.randn((len(p.pos), 8, 4, 3), generator=torch.Generator().manual_seed(2))
    grads = []
    for fn in (lattice_site_vectors, _reference_lattice_site_vectors):
        pos = (p.pos + 0.3).requires_grad_(True)
        vec, dist = fn(pos, p.batch, c, 4)
        ((vec * w).sum() + dist.clamp(max=10).sum()).backward()
        grads.append(pos.grad)
    assert grads[0].abs().sum() > 0 and torch.equal(grads[0], grads[1])


@pytest.mark.parametrize("lengths", [[150, 60, 90, 33], [300, 180, 200, 640], [1100, 770, 500, 130], [9, 12, 12, 3]])
def test_padded_attention_equals_one_batched_call(lengths):
    """Lengths on both sides of the CPU kernel's block sizes (192 and 768 queries, 512 keys)."""
    g = torch.Generator().manual_seed(sum(lengths))
    B, h, d, n = len(lengths), 4, 16, max(lengths)
    q, k, v = (torch.randn(B, h, n, d, generator=g).requires_grad_(True) for _ in range(3))
    mask = torch.arange(n).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    grad_out = torch.randn(B, h, n, d, generator=g) * mask[:, None, :, None]
    results = []
    for fn in (padded_attention, lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v,
                                                                                   attn_mask=m[:, None, None, :])):
        y = fn(q, k, v, mask)
        q.grad = k.grad = v.grad = None
        (y * grad_out).sum().backward()
        results.append((y.detach() * mask[:, None, :, None], q.grad, k.grad, v.grad))
    for got, want in zip(*results, strict=True):
        assert got.abs().sum() > 0 and torch.equal(got, want)


def _perturbed_family(cls):
    cfg = dataclasses.replace(get_config("small"), hidden=16, layers=2, site_k=2, exclusion_iters=3,
                              self_cond=True, site_features=True)
    torch.manual_seed(0)
    model = cls(cfg)
    with torch.no_grad():  # zero-initialised heads would hide terms
        for prm in model.parameters():
            prm.add_(0.05 * torch.randn(prm.shape))
    return model.train()


@pytest.mark.parametrize("cls", [CDVAE, DiffCSP, FlowMM, MatterGen])
def test_shared_self_conditioning_features_give_the_same_loss_and_gradients(cls, monkeypatch):
    conds, parts = _batch([("KMgH3", 4.5), ("RbSrH3", 4.0)])
    model = _perturbed_family(cls)
    calls: list[int] = []
    shared_pass = cls._predict
    n_state = shared_pass.__code__.co_argcount - 2  # the arguments before ``feats``, self excluded

    def fresh_pass(self, *args):  # the step before: the features computed again for every pass
        calls.append(1)
        return shared_pass(self, *args[:n_state])

    took_self_cond = False
    for seed in range(4):
        results = []
        for patch in (False, True):
            if patch:
                monkeypatch.setattr(cls, "_predict", fresh_pass)
            model.zero_grad(set_to_none=True)
            calls.clear()
            loss, _ = model.loss(conds, parts, torch.Generator().manual_seed(seed))
            loss.backward()
            results.append((loss.detach(), [q.grad.clone() for q in model.parameters() if q.grad is not None]))
            monkeypatch.setattr(cls, "_predict", shared_pass)
        took_self_cond |= len(calls) == 2
        (la, ga), (lb, gb) = results
        assert torch.equal(la, lb) and len(ga) == len(gb) > 0
        assert all(torch.equal(x, y) for x, y in zip(ga, gb, strict=True))
    assert took_self_cond  # at least one seed ran the self-conditioning pass on shared features
    assert np.isfinite(float(la))
