"""Task-1 model families: (unit cell, R, rotation) -> particle, from noise.

Every family (:class:`~c2np.models.forward.base.GeneratorBase`) implements

* ``loss(conds, particles, g) -> (loss, logs)``: the training objective. ``particles`` are
  the targets (used only as the data being noised / reconstructed).
* ``sample(conds, g, steps=None, *, ablation=SHIPPED) -> list[Particle]``: generation. It
  receives only :class:`~c2np.models.data.Condition` objects (cell, R, rotation); the species
  come from the cell. ``ablation`` (:mod:`c2np.models.forward.ablation`) switches off analytic
  priors; the default samples as shipped.

Positions are generated in units of R (``u = x / R``, the sphere is the unit ball); the
networks see Å (``u * R``) to build neighbour lists and lattice-phase features. Atom types
are indices into the cell's sorted species ("slots").

Where the atom count comes from: the count head (:class:`~c2np.models.backbone.CountHead`)
draws it for every family except ``sitescore`` (the carved candidates it keeps); MatterGen's
sampler, with ``sample_count_margin`` and ``sample_site_tol_angstrom`` (as shipped), draws an
over-complete count and keeps the atoms that land on distinct lattice sites, so its count is
set by the site filling.

Families (:data:`FORWARD_FAMILIES`, one module each):

* ``cdvae`` (:mod:`.cdvae`) — latent z from the cell encoder (reparameterised, KL to N(0, I)),
  count and composition heads, noise-conditional score network trained by denoising score
  matching over geometric noise levels, annealed Langevin dynamics at sampling; types
  re-predicted at each step.
* ``diffcsp`` (:mod:`.diffcsp`) — DDPM (cosine schedule, epsilon prediction) jointly over
  positions and continuous one-hot atom types, equivariant EGNN denoiser conditioned on cell,
  R, rotation.
* ``flowmm`` (:mod:`.flowmm`) — conditional flow matching from a uniform-ball prior (radius R)
  to the particle along straight paths (velocity regression), masked discrete flow for types,
  Euler ODE integration at sampling.
* ``mattergen`` (:mod:`.mattergen`) — DDPM over positions plus absorbing-state (D3PM)
  diffusion over types, R dropped to a null token with probability ``cfg_drop`` in training,
  classifier-free guidance on R at sampling; types revealed within the composition head's
  per-element budget.
* ``adit`` (:mod:`.adit`) — per-atom VAE (transformer encoder/decoder) to latents of size
  ``latent_dim``, then (two stages) a flow-matching diffusion transformer (adaLN) over the set
  of frozen, normalised latents that predicts the clean latent, as ADiT.
* ``sitescore`` (:mod:`.sitescore`) — candidate lattice sites from carving the rotated crystal
  at R + margin (cell, R and rotation only), each scored inside/outside by a network on
  invariant features (|x| / R, |x| - R, species, local environment).

Shared parts: :mod:`.base` (conditioner, count head, batching), :mod:`.denoiser` (the EGNN
denoiser and its VP helpers), :mod:`.sites` (the site-assignment head and the site filter),
:mod:`.species` (composition budgets, type reveals), :mod:`.noise` (noise draws, time
schedules, sampler steps), :mod:`.masked` (absorbing-state types).
"""

from __future__ import annotations

from c2np.models.forward.ablation import ARMS, SHIPPED, Ablation
from c2np.models.forward.adit import ADiT
from c2np.models.forward.base import GeneratorBase
from c2np.models.forward.cdvae import CDVAE
from c2np.models.forward.diffcsp import DiffCSP
from c2np.models.forward.flowmm import FlowMM
from c2np.models.forward.mattergen import MatterGen
from c2np.models.forward.sitescore import SiteScorer

__all__ = ["FORWARD_FAMILIES", "GeneratorBase", "CDVAE", "DiffCSP", "FlowMM", "MatterGen", "ADiT", "SiteScorer",
           "Ablation", "SHIPPED", "ARMS"]

#: family name -> class (the registry ``build_model``, training and prediction use)
FORWARD_FAMILIES: dict[str, type[GeneratorBase]] = {
    "cdvae": CDVAE, "diffcsp": DiffCSP, "flowmm": FlowMM, "mattergen": MatterGen, "adit": ADiT,
    "sitescore": SiteScorer,
}
