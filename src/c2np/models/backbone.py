"""Shared PyTorch parts of the learned models.

* :func:`knn_graph` — neighbour lists for finite point sets (SciPy cKDTree on CPU, k nearest
  within a cutoff), no compiled extensions.
* :class:`EGNN` — E(3)-equivariant message passing (Satorras et al. style): invariant
  messages from squared distances, equivariant coordinate updates. Its vector output is
  completed by two equivariant terms, along the position (about the sphere centre) and along
  the *rotated* lattice vectors, so the layer stack is equivariant jointly in the particle and
  the crystal frame and can still place atoms in the orientation it is asked for. (A full
  denoiser is not: the :class:`Conditioner` embeds the rotation matrix and quaternion through
  an MLP; see docs/explanation/models.md.)
* :class:`CellEncoder` — encoder of the periodic unit cell: lattice invariants (lengths,
  angle cosines, volume per atom) plus a periodic graph over the basis atoms with
  minimum-image distances.
* :class:`Conditioner` — cell encoding + embedding of R + rotation features (matrix and
  quaternion) -> one conditioning vector per sample, with an optional null-R token
  (classifier-free guidance).
* :class:`CountHead` — atom count from cell + R: log n = log(rho_cell * 4/3 pi R^3) + a learned
  correction (number-density inductive bias).
* :class:`AdaLNBlock` — a transformer block with adaptive layer norm (DiT style).

Tensors are float32; positions in Å unless a name says ``_unit`` (divided by R).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation
from torch import Tensor, nn

from c2np.errors import C2NPInputError
from c2np.models.data import MAX_SPECIES_SLOTS, Condition, species_slots
from c2np.particle import Particle

__all__ = ["scatter_sum", "scatter_mean", "knn_graph", "gaussian_rbf", "sinusoidal_embedding", "periodic_features",
           "MLP", "ConditionBatch", "collate_conditions", "ParticleBatch", "collate_particles",
           "CellEncoder", "Conditioner", "CountHead", "frame_features", "EGNN", "AdaLNBlock",
           "to_padded", "from_padded", "padded_attention", "N_FRAME_FEATURES", "N_Z", "lattice_site_vectors",
           "site_edge_features"]

N_Z = 119  # atomic-number vocabulary (0 = padding / mask)


# ---------------------------------------------------------------------------------------
# small utilities
def scatter_sum(src: Tensor, index: Tensor, n: int) -> Tensor:
    """Sum rows of ``src`` (E, ...) into ``n`` bins given by ``index`` (E,)."""
    out = src.new_zeros((n,) + tuple(src.shape[1:]))
    return out.index_add_(0, index, src)


def scatter_mean(src: Tensor, index: Tensor, n: int) -> Tensor:
    """Mean of rows of ``src`` per bin (empty bins give 0)."""
    total = scatter_sum(src, index, n)
    count = scatter_sum(torch.ones_like(index, dtype=src.dtype), index, n).clamp(min=1)
    return total / count.view((-1,) + (1,) * (src.dim() - 1))


def knn_graph(pos: Tensor, batch: Tensor, k: int, cutoff_angstrom: float = math.inf) -> Tensor:
    """Directed edges (2, E) = (source j, target i): the ``k`` nearest neighbours of each atom
    i within ``cutoff_angstrom`` in its own graph (``batch`` (N,) must be sorted)."""
    p = pos.detach().cpu().numpy().astype(np.float64)
    b = batch.cpu().numpy()
    src, dst = [], []
    if len(b) == 0:
        return torch.zeros((2, 0), dtype=torch.long, device=pos.device)
    bounds = np.flatnonzero(np.diff(b)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [len(b)]])
    for s, e in zip(starts, ends):
        n = e - s
        if n < 2:
            continue
        kk = min(k + 1, n)
        ub = cutoff_angstrom if math.isfinite(cutoff_angstrom) else np.inf
        dist, idx = cKDTree(p[s:e]).query(p[s:e], k=kk, distance_upper_bound=ub)
        rows = np.repeat(np.arange(n), kk)
        cols = idx.reshape(-1)
        ok = (cols < n) & (cols != rows)
        src.append(cols[ok] + s)
        dst.append(rows[ok] + s)
    if not src:
        return torch.zeros((2, 0), dtype=torch.long, device=pos.device)
    return torch.as_tensor(np.stack([np.concatenate(src), np.concatenate(dst)]), dtype=torch.long,
                           device=pos.device)


def gaussian_rbf(d: Tensor, start: float, stop: float, n: int) -> Tensor:
    """(.., n) Gaussian radial basis of distances ``d`` on [start, stop]."""
    centres = torch.linspace(start, stop, n, device=d.device, dtype=d.dtype)
    width = (stop - start) / max(n - 1, 1)
    return torch.exp(-0.5 * ((d.unsqueeze(-1) - centres) / width) ** 2)


def sinusoidal_embedding(t: Tensor, dim: int, *, max_period: float = 1e4) -> Tensor:
    """(B, dim) sinusoidal features of scalars ``t`` (B,) (multiplied by 1000 first, so t in [0, 1])."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=t.dtype, device=t.device) / half)
    args = 1000.0 * t.unsqueeze(-1) * freqs
    emb = torch.cat([torch.sin(args), torch.cos(args)], dim=-1)
    return F.pad(emb, (0, dim - 2 * half))


def periodic_features(frac: Tensor, n_freq: int) -> Tensor:
    """(..., 3) fractional coordinates or differences -> (..., 6 n_freq) Fourier features
    ``sin, cos (2 pi k x)``, k = 1..n_freq, per component (period 1)."""
    k = torch.arange(1, n_freq + 1, dtype=frac.dtype, device=frac.device) * (2 * math.pi)
    x = frac[..., None] * k
    return torch.cat([torch.sin(x), torch.cos(x)], dim=-1).flatten(-2)


class MLP(nn.Sequential):
    """Linear-SiLU-...-Linear."""

    def __init__(self, n_in: int, n_hidden: int, n_out: int, n_layers: int = 2) -> None:
        mods: list[nn.Module] = []
        d = n_in
        for _ in range(n_layers - 1):
            mods += [nn.Linear(d, n_hidden), nn.SiLU()]
            d = n_hidden
        mods.append(nn.Linear(d, n_out))
        super().__init__(*mods)


# ---------------------------------------------------------------------------------------
# batches
@dataclass
class ConditionBatch:
    """Collated task-1 conditions (B samples). Built only from :class:`Condition` objects.

    lattice (B,3,3) Å rows a,b,c; rotation (B,3,3); quaternion (B,4); radius (B,) Å;
    lattice_rot (B,3,3) rows of the lattice vectors in the particle frame;
    inv_lattice_rot (B,3,3); centre_frac (B,3) carving centre; density (B,) atoms/Å³; lattice_feats (B,8);
    slots_z (B,S) atomic numbers of the cell's species (0 = empty slot), slot_mask (B,S);
    basis_z (Nb,), basis_frac (Nb,3), basis_batch (Nb,), basis_edges (2,Eb), basis_dist (Eb,) Å.
    """

    lattice: Tensor
    rotation: Tensor
    quaternion: Tensor
    radius: Tensor
    lattice_rot: Tensor
    inv_lattice_rot: Tensor
    centre_frac: Tensor
    density: Tensor
    lattice_feats: Tensor
    slots_z: Tensor
    slot_mask: Tensor
    basis_z: Tensor
    basis_frac: Tensor
    basis_batch: Tensor
    basis_edges: Tensor
    basis_dist: Tensor

    @property
    def size(self) -> int:
        """Number of samples B."""
        return int(self.radius.shape[0])

    def tensors(self) -> dict[str, Tensor]:
        """All fields by name (for leak tests and inspection)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def to(self, device: torch.device | str) -> ConditionBatch:
        """The same batch with every tensor on ``device``."""
        return ConditionBatch(**{k: v.to(device) for k, v in self.tensors().items()})


def _lattice_features(lattice: np.ndarray, n_basis: int) -> np.ndarray:
    lengths = np.linalg.norm(lattice, axis=1)
    cosines = [float(np.dot(lattice[1], lattice[2]) / (lengths[1] * lengths[2])),
               float(np.dot(lattice[0], lattice[2]) / (lengths[0] * lengths[2])),
               float(np.dot(lattice[0], lattice[1]) / (lengths[0] * lengths[1]))]
    vol = abs(float(np.linalg.det(lattice)))
    return np.array([*(lengths / 10.0), *cosines, (vol / n_basis) ** (1 / 3) / 3.0, math.log(vol) / 5.0])


def _min_image_pairs(cell_lattice: np.ndarray, frac: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All (i, j) basis pairs with their minimum-image distance (Å) over translations in
    {-1,0,1}^3 (i == j uses the shortest non-zero translation)."""
    n = len(frac)
    shifts = np.array(np.meshgrid([-1, 0, 1], [-1, 0, 1], [-1, 0, 1], indexing="ij")).reshape(3, -1).T
    diff = frac[None, :, None, :] - frac[:, None, None, :] + shifts[None, None, :, :]  # (n,n,27,3)
    d = np.linalg.norm(diff @ cell_lattice, axis=-1)
    d[d < 1e-8] = np.inf
    dmin = d.min(axis=2)
    ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return ii.reshape(-1), jj.reshape(-1), dmin.reshape(-1)


def collate_conditions(conds: Sequence[Condition]) -> ConditionBatch:
    """Collate conditions into tensors. Uses only cell, R and rotation."""
    if not conds:
        raise C2NPInputError("no conditions to collate")
    B = len(conds)
    lat = np.stack([c.cell.lattice_angstrom for c in conds])
    rot = np.stack([Rotation.from_quat(c.quaternion).as_matrix() for c in conds])
    lat_rot = np.einsum("bkj,bij->bki", lat, rot)  # rows rotated: (M a_k)
    slots = np.zeros((B, MAX_SPECIES_SLOTS), dtype=np.int64)
    bz, bf, bb, e_src, e_dst, e_d = [], [], [], [], [], []
    offset = 0
    for b, c in enumerate(conds):
        zs = species_slots(c.cell)
        slots[b, :len(zs)] = zs
        ii, jj, dd = _min_image_pairs(c.cell.lattice_angstrom, c.cell.frac_coords)
        e_src.append(jj + offset)
        e_dst.append(ii + offset)
        e_d.append(dd)
        bz.append(c.cell.numbers)
        bf.append(c.cell.frac_coords)
        bb.append(np.full(c.cell.n_atoms, b))
        offset += c.cell.n_atoms
    f32 = torch.float32
    return ConditionBatch(
        lattice=torch.as_tensor(lat, dtype=f32),
        rotation=torch.as_tensor(rot, dtype=f32),
        quaternion=torch.as_tensor(np.stack([c.quaternion for c in conds]), dtype=f32),
        radius=torch.as_tensor([c.radius_angstrom for c in conds], dtype=f32),
        lattice_rot=torch.as_tensor(lat_rot, dtype=f32),
        inv_lattice_rot=torch.as_tensor(np.linalg.inv(lat_rot), dtype=f32),
        centre_frac=torch.as_tensor(np.array([c.centre_frac for c in conds], dtype=np.float64), dtype=f32),
        density=torch.as_tensor([c.cell.number_density_per_angstrom3 for c in conds], dtype=f32),
        lattice_feats=torch.as_tensor(np.stack([_lattice_features(c.cell.lattice_angstrom, c.cell.n_atoms)
                                                for c in conds]), dtype=f32),
        slots_z=torch.as_tensor(slots),
        slot_mask=torch.as_tensor(slots > 0),
        basis_z=torch.as_tensor(np.concatenate(bz), dtype=torch.long),
        basis_frac=torch.as_tensor(np.concatenate(bf), dtype=f32),
        basis_batch=torch.as_tensor(np.concatenate(bb), dtype=torch.long),
        basis_edges=torch.as_tensor(np.stack([np.concatenate(e_src), np.concatenate(e_dst)]), dtype=torch.long),
        basis_dist=torch.as_tensor(np.minimum(np.concatenate(e_d), 50.0), dtype=f32),
    )


@dataclass
class ParticleBatch:
    """Collated particles: pos (N,3) Å, z (N,) atomic numbers, types (N,) slot indices into
    the sample's cell species (-1 when no cell is given), batch (N,), counts (B,)."""

    pos: Tensor
    z: Tensor
    types: Tensor
    batch: Tensor
    counts: Tensor

    @property
    def size(self) -> int:
        """Number of samples B."""
        return int(self.counts.shape[0])

    def to(self, device: torch.device | str) -> ParticleBatch:
        """The same batch with every tensor on ``device``."""
        return ParticleBatch(pos=self.pos.to(device), z=self.z.to(device), types=self.types.to(device),
                             batch=self.batch.to(device), counts=self.counts.to(device))


def collate_particles(particles: Sequence[Particle], conds: Sequence[Condition] | None = None) -> ParticleBatch:
    """Collate particles; with ``conds``, atom types are mapped to slots of the cell species."""
    pos, zs, types, batch = [], [], [], []
    for b, p in enumerate(particles):
        pos.append(p.positions_angstrom)
        zs.append(p.numbers)
        batch.append(np.full(p.n_atoms, b))
        if conds is not None:
            slots = species_slots(conds[b].cell)
            idx = np.searchsorted(slots, p.numbers)
            idx = np.clip(idx, 0, len(slots) - 1)
            if p.n_atoms and not np.all(slots[idx] == p.numbers):
                raise C2NPInputError(f"particle {b} has species not in its cell {conds[b].cell.material_id!r}")
            types.append(idx)
        else:
            types.append(np.full(p.n_atoms, -1))

    def cat(xs: list[np.ndarray], d: torch.dtype) -> Tensor:
        return torch.as_tensor(np.concatenate(xs) if xs else np.zeros(0), dtype=d)

    return ParticleBatch(pos=cat(pos, torch.float32).reshape(-1, 3), z=cat(zs, torch.long),
                         types=cat(types, torch.long), batch=cat(batch, torch.long),
                         counts=torch.as_tensor([p.n_atoms for p in particles], dtype=torch.long))


# ---------------------------------------------------------------------------------------
# encoders and heads
class CellEncoder(nn.Module):
    """Invariant encoding (B, hidden) of a periodic unit cell: species + fractional-coordinate
    phases of the basis atoms, one round of message passing over minimum-image distances,
    mean pooling, and the lattice invariants."""

    def __init__(self, hidden: int, n_rbf: int = 16) -> None:
        super().__init__()
        self.n_rbf = n_rbf
        self.z_emb = nn.Embedding(N_Z, hidden)
        self.node_in = nn.Linear(hidden + 6, hidden)
        self.msg = MLP(2 * hidden + n_rbf, hidden, hidden)
        self.upd = MLP(2 * hidden, hidden, hidden)
        self.out = MLP(hidden + 8, hidden, hidden)

    def forward(self, c: ConditionBatch) -> Tensor:
        phase = 2 * math.pi * c.basis_frac
        h = self.node_in(torch.cat([self.z_emb(c.basis_z), torch.sin(phase), torch.cos(phase)], -1))
        src, dst = c.basis_edges
        rbf = gaussian_rbf(c.basis_dist, 0.5, 8.0, self.n_rbf)
        m = self.msg(torch.cat([h[dst], h[src], rbf], -1))
        h = h + self.upd(torch.cat([h, scatter_mean(m, dst, h.shape[0])], -1))
        pooled = scatter_mean(h, c.basis_batch, c.size)
        return self.out(torch.cat([pooled, c.lattice_feats], -1))


class Conditioner(nn.Module):
    """Conditioning vector (B, hidden) from the cell encoding, an embedding of R (Gaussian
    basis over 4..32 Å and R/30) and the rotation (matrix entries and quaternion).
    ``drop_r`` (B,) bool replaces the R embedding by a learned null token (CFG)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.cell = CellEncoder(hidden)
        self.r_emb = MLP(17, hidden, hidden)
        self.rot_emb = MLP(13, hidden, hidden)
        self.null_r = nn.Parameter(torch.zeros(hidden))
        self.mix = MLP(3 * hidden, hidden, hidden)

    def forward(self, c: ConditionBatch, drop_r: Tensor | None = None) -> Tensor:
        r = c.radius
        r_feat = self.r_emb(torch.cat([gaussian_rbf(r, 4.0, 32.0, 16), (r / 30.0).unsqueeze(-1)], -1))
        if drop_r is not None:
            r_feat = torch.where(drop_r.unsqueeze(-1), self.null_r.expand_as(r_feat), r_feat)
        rot = self.rot_emb(torch.cat([c.rotation.reshape(-1, 9), c.quaternion], -1))
        return self.mix(torch.cat([self.cell(c), r_feat, rot], -1))


class CountHead(nn.Module):
    """Atom count from cell + R with a scale-aware form:
    log n = log(rho_cell * 4/3 pi R^3) + c0(cell) + c1(cell) / R,
    where (c0, c1) come from the lattice invariants only (initialised to 0). The 1/R term is a
    surface correction, so the count extrapolates to radii outside the training range."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.corr = MLP(8, hidden, 2)
        last = cast(nn.Linear, self.corr[-1])
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)

    def log_count(self, c: ConditionBatch, cond: Tensor | None = None) -> Tensor:
        """(B,) predicted log atom count (``cond`` is accepted for API symmetry and unused)."""
        base = torch.log(c.density * (4.0 / 3.0) * math.pi * c.radius ** 3)
        c0, c1 = self.corr(c.lattice_feats).unbind(-1)
        return base + 0.1 * c0 + c1 / c.radius

    def loss(self, c: ConditionBatch, cond: Tensor | None, counts: Tensor) -> Tensor:
        """MSE on log counts."""
        return F.mse_loss(self.log_count(c, cond), torch.log(counts.float().clamp(min=1)))

    def sample(self, c: ConditionBatch, cond: Tensor | None = None) -> Tensor:
        """(B,) integer counts (>= 1)."""
        return torch.exp(self.log_count(c, cond)).round().clamp(min=1).long()


N_FRAME_FEATURES = 14


def frame_features(pos: Tensor, batch: Tensor, c: ConditionBatch) -> Tensor:
    """(N, 14) invariant per-atom features of positions (Å) in the rotated crystal frame:
    sin/cos of 2 pi f and 4 pi f (f = fractional coordinates of the crystal: positions in the
    rotated lattice frame plus the carving centre), |x| / R and (|x| - R) / 2 Å (clipped)."""
    frac = torch.einsum("nd,ndk->nk", pos, c.inv_lattice_rot[batch]) + c.centre_frac[batch]
    ph = 2 * math.pi * frac
    r = pos.norm(dim=-1)
    R = c.radius[batch]
    return torch.cat([torch.sin(ph), torch.cos(ph), torch.sin(2 * ph), torch.cos(2 * ph),
                      (r / R).unsqueeze(-1), ((r - R) / 2.0).clamp(-3, 3).unsqueeze(-1)], -1)


def lattice_site_vectors(pos: Tensor, batch: Tensor, c: ConditionBatch, k: int = 1,
                         *, with_keys: bool = False) -> tuple[Tensor, ...]:
    """Displacements (N, S, k, 3) Å from each position (Å, particle frame) to the ``k`` nearest
    sites of the conditioning crystal occupied by species slot s, nearest first, and their
    lengths (N, S, k) (1e3 Å for a slot the cell does not have); with ``with_keys`` also an
    int64 key (N, S, k) naming each site (sample, basis atom, lattice translation), equal for
    two atoms exactly when they point at the same site.

    A property of the infinite lattice of the condition (cell, rotation, centre), the
    particle-frame counterpart of CSPNet's fractional-coordinate features: it enumerates no
    sphere and knows nothing of R or of any particle. Candidates: the 27 images around the
    nearest (rounded) image of every basis atom, so the k nearest are exact for k up to the
    sites of a slot within one lattice step (and the nearest always is).

    Computed one sample at a time over that sample's basis atoms; each topk row keeps the
    columns of the padded batch (27 per basis atom of the largest cell), so the result, ties
    included, is the one padded computation's (tests/test_train_step_speed.py).
    """
    if len(batch) > 1 and bool((batch[1:] < batch[:-1]).any()):  # atoms not grouped by sample
        order = torch.argsort(batch, stable=True)
        back = torch.empty_like(order)
        back[order] = torch.arange(len(order), device=order.device)
        out = lattice_site_vectors(pos[order], batch[order], c, k, with_keys=with_keys)
        return tuple(t[back] for t in out)
    S_full = c.slots_z.shape[1]
    S_ = max(1, int(c.slot_mask.sum(1).max()))  # slots in use (filled first); the rest is padding
    frac = torch.einsum("nd,ndk->nk", pos, c.inv_lattice_rot[batch]) + c.centre_frac[batch]
    nb = torch.bincount(c.basis_batch, minlength=c.size)
    bfrac, _ = to_padded(c.basis_frac, c.basis_batch, nb)  # (B, m, 3), zeros past a cell's basis
    bslot = (c.basis_z.unsqueeze(-1) == c.slots_z[c.basis_batch]).float().argmax(-1)
    bslot_p, _ = to_padded(bslot.unsqueeze(-1), c.basis_batch, nb)
    m = bfrac.shape[1]
    M = 27 * m  # candidates per atom: basis atom j, image i at column 27 j + i (as one padded batch)
    shifts = _image_shifts(pos.device, pos.dtype)  # (27, 3)
    kk = min(int(k), M)
    slot_ids = torch.arange(S_, device=pos.device).view(-1, 1)
    vecs, dmins, idxs = [], [], []
    start = 0
    # one sample at a time, over its own basis atoms only; each topk row still spans the M
    # columns of the padded batch (1e3 where a column is not of the slot), so the choice,
    # ties included, is the padded computation's
    for b, n_b in enumerate(torch.bincount(batch, minlength=c.size).tolist()):
        rows = slice(start, start + n_b)
        start += n_b
        m_b = int(nb[b])
        diff = bfrac[b, :m_b] - frac[rows].unsqueeze(1)  # (n_b, m_b, 3)
        diff = diff - torch.round(diff)
        cand = diff.unsqueeze(2) + shifts  # (n_b, m_b, 27, 3)
        disp = torch.einsum("nmik,nkd->nmid", cand, c.lattice_rot[batch[rows]]).flatten(1, 2)  # (n_b, 27 m_b, 3)
        member = bslot_p[b, :m_b, 0].repeat_interleave(27).unsqueeze(0) == slot_ids  # (S', 27 m_b)
        d_slot = F.pad(torch.where(member, disp.norm(dim=-1).unsqueeze(1), 1e3), (0, M - 27 * m_b), value=1e3)
        dmin, idx = torch.topk(d_slot, kk, dim=-1, largest=False)  # (n_b, S', k)
        safe = idx.clamp(max=max(27 * m_b - 1, 0))  # a column past the basis is never a site (dmin 1e3)
        vec = torch.gather(disp.unsqueeze(1).expand(-1, S_, -1, -1), 2, safe.unsqueeze(-1).expand(-1, -1, -1, 3))
        vecs.append(torch.where((dmin < 1e3).unsqueeze(-1), vec, torch.zeros_like(vec)))
        dmins.append(dmin)
        idxs.append(idx)
    vec, dmin, idx = torch.cat(vecs), torch.cat(dmins), torch.cat(idxs)
    pad = S_full - S_
    if pad:
        vec = F.pad(vec, (0, 0, 0, 0, 0, pad))
        dmin = F.pad(dmin, (0, 0, 0, pad), value=1e3)
    if not with_keys:
        return vec, dmin
    # key of a chosen candidate: basis atom j = idx // 27, translation shifts[idx % 27] - round(f_j - f)
    atom = idx // 27
    fj = bfrac[batch.view(-1, 1, 1), atom]  # (N, S', k, 3)
    trans = (shifts[idx % 27] - torch.round(fj - frac.view(-1, 1, 1, 3))).long() + 2048
    base = batch.view(-1, 1, 1) * m + atom
    key = ((base * 4096 + trans[..., 0]) * 4096 + trans[..., 1]) * 4096 + trans[..., 2]
    if pad:
        key = F.pad(key, (0, 0, 0, pad), value=-1)
    return vec, dmin, key


def _image_shifts(device: torch.device, dtype: torch.dtype) -> Tensor:
    """(27, 3) integer lattice translations {-1, 0, 1}^3."""
    r = torch.tensor([-1.0, 0.0, 1.0], device=device, dtype=dtype)
    return torch.cartesian_prod(r, r, r)


def site_edge_features(site_pos: Tensor, edges: Tensor, *, width_angstrom: float = 0.5) -> Tensor:
    """(E, S) soft indicator that the two atoms of an edge have the same nearest lattice site
    of slot s: exp(-|p_is - p_js|^2 / (2 w^2)), with ``site_pos`` (N, S, 3) the sites (Å)."""
    src, dst = edges
    d2 = ((site_pos.index_select(0, dst) - site_pos.index_select(0, src)) ** 2).sum(-1)
    return torch.exp(-0.5 * d2 / width_angstrom ** 2)


class EGNNLayer(nn.Module):
    """One E(n)-equivariant layer: m_ij = phi_e(h_i, h_j, rbf(|x_i - x_j|), |x_i - x_j|^2),
    x_i += mean_j (x_i - x_j) / (|x_i - x_j| + 1) phi_x(m_ij), h_i += phi_h(h_i, sum_j m_ij)."""

    def __init__(self, hidden: int, n_rbf: int, rbf_max: float, update_coords: bool,
                 edge_dim: int = 0) -> None:
        super().__init__()
        self.n_rbf, self.rbf_max, self.update_coords = n_rbf, rbf_max, update_coords
        self.edge = nn.Sequential(MLP(2 * hidden + n_rbf + 1 + edge_dim, hidden, hidden), nn.SiLU())
        self.node = MLP(2 * hidden, hidden, hidden)
        self.norm = nn.LayerNorm(hidden)
        if update_coords:
            self.coord = MLP(hidden, hidden, 1)
            last = cast(nn.Linear, self.coord[-1])
            nn.init.normal_(last.weight, std=1e-3)
            nn.init.zeros_(last.bias)

    def forward(self, h: Tensor, x: Tensor, edges: Tensor,
                edge_attr: Tensor | None = None) -> tuple[Tensor, Tensor]:
        src, dst = edges
        # index_select: the rows of h[dst] (a gather), with an index_add backward (faster than
        # indexing's index_put, the same sums in the same order)
        rel = x.index_select(0, dst) - x.index_select(0, src)
        d2 = (rel * rel).sum(-1)
        d = torch.sqrt(d2 + 1e-8)
        rest = [gaussian_rbf(d, 0.0, self.rbf_max, self.n_rbf), (d2 / self.rbf_max ** 2).clamp(max=10).unsqueeze(-1)]
        if edge_attr is not None:
            rest.append(edge_attr)
        if torch.is_grad_enabled():  # training: the edge MLP on the concatenated features, as trained
            m = self.edge(torch.cat([h.index_select(0, dst), h.index_select(0, src), *rest], -1))
        else:
            m = self.edge_message(h, edges, torch.cat(rest, -1))
        if self.update_coords and edges.shape[1]:
            x = x + scatter_mean(rel / (d + 1.0).unsqueeze(-1) * self.coord(m), dst, x.shape[0])
        agg = scatter_sum(m, dst, h.shape[0]) / 8.0
        h = self.norm(h + self.node(torch.cat([h, agg], -1)))
        return h, x

    def edge_message(self, h: Tensor, edges: Tensor, rest: Tensor) -> Tensor:
        """The edge MLP's messages (E, hidden) with its first linear layer split by input block:
        W [h_i, h_j, rest] + b = (W_i h)_i + (W_j h)_j + W_r rest + b, the node blocks projected
        once per atom (N rows) instead of once per edge (E = k N rows), then gathered. Equal to
        ``self.edge(cat([h[dst], h[src], rest]))`` up to float rounding (sampling uses it; the
        training step keeps the concatenated form, bit for bit as trained)."""
        src, dst = edges
        mlp = cast(nn.Sequential, self.edge[0])
        first = cast(nn.Linear, mlp[0])
        H = h.shape[1]
        w = first.weight
        node = F.linear(h, torch.cat([w[:, :H], w[:, H:2 * H]], 0))  # (N, 2 hidden): W_i h, W_j h
        hidden = w.shape[0]
        pre = torch.addmm(first.bias, rest, w[:, 2 * H:].t())
        pre += node[:, :hidden].index_select(0, dst)
        pre += node[:, hidden:].index_select(0, src)
        second = cast(nn.Linear, mlp[2])
        return F.silu(F.linear(F.silu(pre, inplace=True), second.weight, second.bias), inplace=True)


class EGNN(nn.Module):
    """Stack of :class:`EGNNLayer` on a kNN graph built from the input positions.

    forward(h_in (N, in_dim), pos (N,3) Å, batch (N,), cond_node (N, hidden), lattice_rot (B,3,3)
    or None, radius (B,)) -> (h (N, hidden) invariant, v (N, 3) equivariant vector output).
    v = (coordinate updates) + a_i x_i / R + sum_k b_ik a_k / |a_k| with (a_i, b_ik) from h_i.
    """

    def __init__(self, in_dim: int, hidden: int, layers: int, *, knn: int = 12,
                 cutoff_angstrom: float = math.inf, n_rbf: int = 16, rbf_max: float = 8.0,
                 update_coords: bool = True, edge_dim: int = 0, n_vectors: int = 0,
                 global_token: bool = False) -> None:
        super().__init__()
        self.knn, self.cutoff, self.n_vectors = knn, cutoff_angstrom, n_vectors
        self.inp = nn.Linear(in_dim + hidden, hidden)
        self.cond = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(layers)])
        self.layers = nn.ModuleList([EGNNLayer(hidden, n_rbf, rbf_max, update_coords, edge_dim)
                                     for _ in range(layers)])
        # global token: every layer adds a projection of the per-particle mean of h to each atom
        self.glob = nn.ModuleList([MLP(hidden, hidden, hidden) for _ in range(layers)]) if global_token else None
        self.vec = nn.Linear(hidden, 4 + n_vectors)
        nn.init.zeros_(self.vec.weight)
        nn.init.zeros_(self.vec.bias)

    def forward(self, h_in: Tensor, pos: Tensor, batch: Tensor, cond_node: Tensor,
                lattice_rot: Tensor | None, radius: Tensor,
                edges: Tensor | None = None, edge_attr: Tensor | None = None,
                vectors: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``edge_attr`` (E, edge_dim) invariant edge features for ``edges``; ``vectors``
        (N, n_vectors, 3) extra equivariant vectors the output may combine (coefficients from h)."""
        if edges is None:
            edges = knn_graph(pos, batch, self.knn, self.cutoff)
        h = self.inp(torch.cat([h_in, cond_node], -1))
        x = pos
        n_graphs = int(radius.shape[0])
        for k, (cond_lin, layer) in enumerate(zip(self.cond, self.layers)):
            hh = h + cond_lin(cond_node)
            if self.glob is not None:
                hh = hh + self.glob[k](scatter_mean(h, batch, n_graphs))[batch]
            h, x = layer(hh, x, edges, edge_attr)
        coef = self.vec(h)
        v = (x - pos) + coef[:, :1] * pos / radius[batch].unsqueeze(-1)
        if lattice_rot is not None:
            axes = lattice_rot / lattice_rot.norm(dim=-1, keepdim=True)
            v = v + torch.einsum("nk,nkd->nd", coef[:, 1:4], axes[batch])
        if vectors is not None and self.n_vectors:
            v = v + torch.einsum("nk,nkd->nd", coef[:, 4:4 + self.n_vectors], vectors)
        return h, v


# ---------------------------------------------------------------------------------------
# transformer parts (ADiT)
def to_padded(x: Tensor, batch: Tensor, counts: Tensor) -> tuple[Tensor, Tensor]:
    """(N, D) rows grouped by sorted ``batch`` -> (B, n_max, D) and a (B, n_max) validity mask."""
    B = int(counts.shape[0])
    n_max = int(counts.max().item()) if B else 0
    offsets = torch.cumsum(counts, 0) - counts
    idx = torch.arange(x.shape[0], device=x.device) - offsets[batch]
    out = x.new_zeros((B, n_max) + tuple(x.shape[1:]))
    out[batch, idx] = x
    mask = torch.arange(n_max, device=x.device).unsqueeze(0) < counts.unsqueeze(1)
    return out, mask


def from_padded(x: Tensor, mask: Tensor) -> Tensor:
    """Inverse of :func:`to_padded`: the valid rows, (N, D)."""
    return x[mask]


def _flash_lengths(n: int, length: int) -> tuple[int, int]:
    """(query rows, key columns) of one sample of ``length`` real tokens padded to ``n`` that
    PyTorch's CPU flash-attention kernel splits into the same blocks as the padded batch: it
    cuts n queries into blocks of 32 rows (n < 192), 64 (n < 768) or 256, and the keys into
    blocks of 512 columns. The sample keeps whole query blocks (at least as many queries as
    the smallest n of its block size, so the block size stays) and whole key blocks."""
    q_block, q_floor = (256, 768) if n >= 768 else ((64, 192) if n >= 192 else (32, 1))
    rows = min(n, max(-(-length // q_block) * q_block, q_floor))
    return rows, min(n, -(-max(length, 1) // 512) * 512)


def padded_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """Scaled dot-product attention (B, h, n, d) of padded token sets: ``mask`` (B, n) True =
    real token; padded keys are masked out, padded query rows are not used by the caller.

    On the CPU each sample is one call over the query rows and key columns of the blocks
    that hold its tokens (:func:`_flash_lengths`): the padded batch's result for every real
    query, forward and backward, bit for bit (tests/test_train_step_speed.py), without the
    blocks that hold only padding (their rows are 0 here). Elsewhere, and when nothing is
    padded, one batched call."""
    if bool(mask.all()):
        return F.scaled_dot_product_attention(q, k, v)
    attn_mask = mask[:, None, None, :]
    if q.device.type != "cpu":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    n = q.shape[2]
    out = []
    for b, length in enumerate(mask.sum(1).tolist()):
        rows, cols = _flash_lengths(n, int(length))
        y = F.scaled_dot_product_attention(q[b:b + 1, :, :rows], k[b:b + 1, :, :cols], v[b:b + 1, :, :cols],
                                           attn_mask=attn_mask[b:b + 1, :, :, :cols])
        out.append(F.pad(y, (0, 0, 0, n - rows)) if rows < n else y)
    return torch.cat(out)


class AdaLNBlock(nn.Module):
    """Transformer block with adaptive layer norm conditioned on a vector (DiT, adaLN-Zero)."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ff = MLP(hidden, 2 * hidden, hidden)
        self.ada = nn.Linear(hidden, 6 * hidden)
        nn.init.zeros_(self.ada.weight)
        nn.init.zeros_(self.ada.bias)

    def forward(self, x: Tensor, cond: Tensor, mask: Tensor) -> Tensor:
        """x (B, n, D), cond (B, D), mask (B, n) True = real token."""
        B, n, D = x.shape
        s1, b1, g1, s2, b2, g2 = self.ada(F.silu(cond)).unsqueeze(1).chunk(6, dim=-1)
        y = self.norm1(x) * (1 + s1) + b1
        q, k, v = self.qkv(y).view(B, n, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        y = padded_attention(q, k, v, mask)
        x = x + g1 * self.proj(y.transpose(1, 2).reshape(B, n, D))
        y = self.norm2(x) * (1 + s2) + b2
        return x + g2 * self.ff(y)
