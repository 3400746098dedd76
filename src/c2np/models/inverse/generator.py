"""Task-2 crystal generators: particle -> generated unit cells -> spglib -> space group and
lattice parameters (:class:`CrystalGenerator`).

The network and its generative process are :class:`~c2np.models.inverse.sampler.CellSampler`
(one process per family, :mod:`c2np.models.inverse.registry`). Around it, per particle:

* **Candidates** (:meth:`CrystalGenerator.candidates`): ``n_samples`` cells per plan
  (``z_candidates``: the count head's composition, every training composition, or every
  space-group template of the training cells, sampled under the template's symmetry), also
  conditioned on central crops of the particle (``crop_radii_angstrom``), each read out
  (:func:`~c2np.models.inverse.readout.read_cell_to_prediction`, ``read_rule``), with its
  pair-profile mismatch against the particle (:mod:`c2np.models.inverse.ranking`; for
  ``rank`` ``stretch`` / ``refine`` after an isotropic stretch, and for ``refine`` the best
  template-sampled cells refined to the particle's pair profile).
* **Choice** (:meth:`CrystalGenerator.choose`, :func:`~c2np.models.inverse.choice.choose_candidate`):
  a vote, or the smallest mismatch with a margin towards the more symmetric template.

Training material: ForwardTask training examples (:func:`~c2np.models.inverse.examples.training_pairs`;
under protocol ``strict`` never a held-out material); training is
:func:`~c2np.models.inverse.training.fit_generator`. Prediction sees only the particle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch
from torch import Tensor

from c2np.errors import C2NPInputError
from c2np.models.inverse.choice import Candidate, choose_candidate
from c2np.models.inverse.config import CROP_MIN_GAP_ANGSTROM
from c2np.models.inverse.ranking import (
    best_scale_mismatch,
    cell_pair_profile,
    particle_pair_profile,
    profile_mismatch,
    refine_to_profile,
)
from c2np.models.inverse.readout import min_pair_distance_angstrom, read_cell_to_prediction
from c2np.models.inverse.sampler import CellSampler
from c2np.models.inverse.templates import CellTemplate, TemplateBlocks
from c2np.particle import Particle, central_crop
from c2np.particle_descriptor import ParticleDescriptor, describe, position_noise_angstrom
from c2np.predictions import InversePrediction

__all__ = ["CrystalGenerator"]


class CrystalGenerator(CellSampler):
    """A task-2 crystal generator (see the module): train with
    :func:`~c2np.models.inverse.training.fit_generator`, answer with :meth:`predict_particles`."""

    def condition_views(self, particles: Sequence[Particle]) -> list[list[tuple[float, ParticleDescriptor]]]:
        """Per particle, the extra conditions of :meth:`candidates`: (crop radius Å, descriptor)
        of each :func:`~c2np.particle.central_crop` of ``cfg.crop_radii_angstrom`` that is at
        least :data:`CROP_MIN_GAP_ANGSTROM` smaller than the particle (its largest distance
        from the centroid) and keeps every species of it; none for a particle whose
        :func:`~c2np.particle_descriptor.position_noise_angstrom` exceeds
        ``cfg.crop_max_noise_angstrom``; empty lists without crop radii."""
        out: list[list[tuple[float, ParticleDescriptor]]] = []
        for p in particles:
            views: list[tuple[float, ParticleDescriptor]] = []
            limit = self.cfg.crop_max_noise_angstrom
            if self.cfg.crop_radii_angstrom and p.n_atoms and (limit is None or position_noise_angstrom(p) <= limit):
                pos = p.positions_angstrom - p.positions_angstrom.mean(axis=0)
                radius = float(np.linalg.norm(pos, axis=1).max())
                species = set(np.unique(p.numbers).tolist())
                for r in self.cfg.crop_radii_angstrom:
                    if r + CROP_MIN_GAP_ANGSTROM > radius:
                        continue
                    crop = central_crop(p, r)
                    if crop.n_atoms > 1 and set(np.unique(crop.numbers).tolist()) == species:
                        views.append((r, describe(crop)))
            out.append(views)
        return out

    def candidates(self, descs: Sequence[ParticleDescriptor], *, seed: int = 0, batch: int = 256,
                   profiles: Sequence[np.ndarray] | None = None,
                   particles: Sequence[Particle] | None = None) -> list[list[Candidate]]:
        """The read-out generated cells of each particle (``n_samples`` per composition; the
        compositions: the count head's most probable one (``z_candidates="head"``), every
        training composition (``"all"``) or every space-group template of :attr:`templates`,
        sampled under the template's symmetry (``"templates"``)), each with its structural validity and, given the
        particles' pair profiles (:func:`c2np.models.inverse.ranking.particle_pair_profile`),
        its profile mismatch (else nan). Unreadable cells are left out.

        With ``cfg.crop_radii_angstrom`` the network is also conditioned on the particles'
        central crops (:meth:`condition_views`; ``particles`` needed); those cells are read
        out, ranked and refined against the whole particle (its descriptor's scale and
        species, its profile), with the others. They are drawn after the whole-particle
        cells with their own random stream, so the whole-particle candidates are those of
        the same generator without crops, bit for bit."""
        if self.cfg.crop_radii_angstrom and particles is None:
            raise C2NPInputError("crop_radii_angstrom: the generator needs the particles themselves "
                                 "(use predict_particles, or pass particles=)")
        if particles is not None and len(particles) != len(descs):
            raise C2NPInputError(f"candidates: {len(particles)} particles for {len(descs)} descriptors")
        self.eval()
        out: list[list[tuple[Candidate, CellTemplate | None]]] = [[] for _ in descs]
        dev = self.desc_mean.device
        feats = torch.as_tensor(self.features(descs), device=dev)
        with torch.no_grad():
            logp = torch.log_softmax(self.composition_logits(feats), dim=-1).cpu().numpy()
        whole = [(i, 0.0) for i in range(len(descs))]
        self._draw(whole, feats, logp, torch.Generator(device=dev).manual_seed(int(seed)), descs, profiles, out,
                   batch)
        views = self.condition_views(particles) if particles is not None else [[] for _ in descs]
        crops = [(i, r) for i, vs in enumerate(views) for r, _ in vs]
        if crops:       # their own random stream: the whole-particle candidates stay those of no crops
            crop_seed = int(np.random.SeedSequence([int(seed), 1]).generate_state(1)[0])
            crop_feats = torch.as_tensor(self.features([v for vs in views for _, v in vs]), device=dev)
            self._draw(crops, crop_feats, logp, torch.Generator(device=dev).manual_seed(crop_seed), descs, profiles,
                       out, batch)
        if self.cfg.rank == "refine" and profiles is not None:
            return [self._refined(c, d, p) for c, d, p in zip(out, descs, profiles)]
        return [[c for c, _ in row] for row in out]

    def _draw(self, rows: Sequence[tuple[int, float]], feats: Tensor, logp: np.ndarray, g: torch.Generator,
              descs: Sequence[ParticleDescriptor], profiles: Sequence[np.ndarray] | None,
              out: list[list[tuple[Candidate, CellTemplate | None]]], batch: int) -> None:
        """Sample ``n_samples`` cells per plan for each condition row (particle index, crop
        radius Å or 0 for the whole particle; its features the row of ``feats``) with ``g``,
        read each out against its particle (``descs``, ``profiles``, composition log-probs
        ``logp``) and append it to that particle's list in ``out`` (in the order sample, plan,
        row).

        Cells of every template of one composition and every one of the ``n_samples`` draws
        are generated together, up to ``batch`` rows a batch (:class:`TemplateBlocks`; the
        rows of one template and draw stay consecutive), so a particle costs a few large
        batches of the network instead of ``n_samples`` x templates small ones."""
        owner = np.array([i for i, _ in rows], dtype=np.int64)
        plans = self._plans(len(rows), logp[owner])
        cells: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for comp, members in self._template_groups(plans).items():
            jobs = [(p, s, k) for p in members for s in range(self.cfg.n_samples) for k in range(len(rows))]
            for a in range(0, len(jobs), batch):
                part = jobs[a:a + batch]
                temps: list[CellTemplate | None] = []
                bounds = [0]
                for j, (p, _, _) in enumerate(part):
                    if not temps or part[j - 1][0] != p:
                        temps.append(plans[p][1])
                        bounds.append(j)
                    bounds[-1] = j + 1
                blocks = TemplateBlocks(tuple(t for t in temps if t is not None), tuple(bounds))
                idx = torch.as_tensor([k for _, _, k in part], device=feats.device)
                for (p, s, k), cell in zip(part, self.sample(feats[idx], [comp] * len(part), g, blocks)):
                    cells[(s, p, k)] = cell
        for s in range(self.cfg.n_samples):
            for p, (comps, template) in enumerate(plans):
                if template is None:        # composition plans: one batch per plan and draw
                    order = np.argsort([sum(c) for c in comps], kind="stable")   # batches of similar size
                    for a in range(0, len(rows), batch):
                        idx_np = order[a:a + batch]
                        drawn = self.sample(feats[torch.as_tensor(idx_np, device=feats.device)],
                                            [comps[k] for k in idx_np], g, None)
                        cells.update({(s, p, int(k)): cell for k, cell in zip(idx_np, drawn)})
                    order_rows = [int(k) for k in order]
                else:
                    order_rows = list(range(len(rows)))
                for k in order_rows:
                    xl, fr, sl = cells.pop((s, p, k))
                    o, radius = rows[k]
                    c = self._candidate(xl, fr, sl, descs[o], comps[k], logp[o], template,
                                        None if profiles is None else profiles[o])
                    if c is not None:
                        out[o].append((replace(c, view_radius_angstrom=radius) if radius else c, template))

    @staticmethod
    def _template_groups(plans: Sequence[tuple[list[tuple[int, ...]], CellTemplate | None]]
                         ) -> dict[tuple[int, ...], list[int]]:
        """The template plans grouped by their templates' composition: {composition: plan
        indices}, each group sampled together (:meth:`_draw`)."""
        groups: dict[tuple[int, ...], list[int]] = {}
        for p, (_, template) in enumerate(plans):
            if template is not None:
                groups.setdefault(template.composition, []).append(p)
        return groups

    def _candidate(self, xl: np.ndarray, fr: np.ndarray, sl: np.ndarray, desc: ParticleDescriptor,
                   comp: tuple[int, ...], logp: np.ndarray, template: CellTemplate | None,
                   profile: np.ndarray | None) -> Candidate | None:
        """One generated cell read out (None: unreadable). With a profile its mismatch; for
        ``rank`` ``stretch`` / ``refine`` the lattice first stretched isotropically to the
        particle's pair distances (:func:`~c2np.models.inverse.ranking.best_scale_mismatch`)."""
        lat, frac, numbers = self.cell_of(xl, fr, sl, desc)
        mis = float("nan")
        if profile is not None and self.cfg.rank in ("stretch", "refine"):
            lam, mis = best_scale_mismatch(profile, lat, frac, sl, desc.scale_angstrom)
            lat = lat * lam
        elif profile is not None:
            mis = profile_mismatch(profile, cell_pair_profile(lat, frac, sl, desc.scale_angstrom))
        lp = float(logp[self.compositions.index(comp)]) if comp in self.compositions else float("-inf")
        return self._read(lat, frac, sl, numbers, comp, lp, template, mis)

    def _read(self, lat: np.ndarray, frac: np.ndarray, sl: np.ndarray, numbers: np.ndarray,
              comp: tuple[int, ...], lp: float, template: CellTemplate | None, mis: float
              ) -> Candidate | None:
        """The :class:`Candidate` of a cell in Å (None: spglib reads nothing)."""
        tsg = template.spacegroup if template is not None else 0
        res = read_cell_to_prediction(lat, frac, numbers, rule=self.cfg.read_rule, template_spacegroup=tsg)
        if res is None:
            return None
        return Candidate(comp, res[0], res[1], min_pair_distance_angstrom(lat, frac), mis, lp,
                         float(abs(np.linalg.det(lat))), tsg, (lat, np.asarray(frac) % 1.0, np.asarray(sl)),
                         len(template.rotations) if template is not None else 0)

    def _refined(self, row: list[tuple[Candidate, CellTemplate | None]], desc: ParticleDescriptor,
                 profile: np.ndarray) -> list[Candidate]:
        """A particle's candidates with the ``refine_top`` valid template-sampled ones of smallest
        mismatch replaced by their cells refined to the particle's pair profile
        (:func:`~c2np.models.inverse.ranking.refine_to_profile`, ``refine_evals`` profiles each).

        With ``refine_screen_evals`` > 0 every valid template-sampled candidate is first refined
        with that many profiles (a screen), and the ``refine_top`` of smallest *screened*
        mismatch are then refined from their screened cells with ``refine_evals`` more; the
        other candidates keep their screened cells (a generated cell that starts far from the
        particle's crystal can still be the one that fits it, docs/inverse_results.md)."""
        order = sorted((k for k, (c, t) in enumerate(row) if t is not None and c.cell is not None
                        and c.min_pair_angstrom >= self.cfg.min_pair_angstrom), key=lambda k: row[k][0].mismatch)
        out = [c for c, _ in row]
        if self.cfg.refine_screen_evals > 0:
            for k in order:
                out[k] = self._refine_one(out[k], row[k][1], desc, profile, self.cfg.refine_screen_evals)
            order = sorted(order, key=lambda k: out[k].mismatch)
        for k in order[: self.cfg.refine_top]:
            out[k] = self._refine_one(out[k], row[k][1], desc, profile, self.cfg.refine_evals)
        return out

    def _refine_one(self, c: Candidate, t: CellTemplate | None, desc: ParticleDescriptor, profile: np.ndarray,
                    max_evals: int) -> Candidate:
        """One candidate refined to the particle's pair profile with ``max_evals`` profiles (the
        candidate itself when the refined cell cannot be read or has atoms too close)."""
        assert t is not None and c.cell is not None
        lat, frac, sl = c.cell
        lat, frac, mis = refine_to_profile(profile, t, lat, frac, sl, desc.scale_angstrom, max_evals=max_evals,
                                           shape_starts=self.cfg.refine_shape_starts,
                                           coord_starts=self.cfg.refine_coord_starts)
        new = self._read(lat, frac, sl, self.cell_of(np.zeros((3, 3)), frac, sl, desc)[2], c.composition,
                         c.composition_logprob, t, mis)
        if new is not None and new.min_pair_angstrom >= self.cfg.min_pair_angstrom:
            return replace(new, view_radius_angstrom=c.view_radius_angstrom, generator=c.generator)
        return c

    def _plans(self, n: int, logp: np.ndarray) -> list[tuple[list[tuple[int, ...]], CellTemplate | None]]:
        """The generation plans of :meth:`candidates` for ``n`` particles: (composition per
        particle, template or None) per pass over the particles (``z_candidates``)."""
        if self.cfg.z_candidates == "head":
            return [([self.compositions[int(i)] for i in logp.argmax(-1)], None)]
        if self.cfg.z_candidates == "all":
            return [([c] * n, None) for c in self.compositions]
        if not self.templates:
            raise C2NPInputError("z_candidates 'templates': this generator has no space-group templates "
                                 "(write them with reproduce/inverse-generators/templates.py)")
        return [([t.composition] * n, t) for t in self.templates]

    def predict_descriptors(self, descs: Sequence[ParticleDescriptor], *, seed: int = 0,
                            batch: int = 256, profiles: Sequence[np.ndarray] | None = None,
                            noise_angstrom: Sequence[float] | None = None,
                            particles: Sequence[Particle] | None = None
                            ) -> list[InversePrediction | None]:
        """Predictions for particles given by their descriptors (and, for ``rank="profile"``,
        their pair profiles; with ``symmetric_margin_per_angstrom`` > 0, their
        :func:`position_noise_angstrom`): the :meth:`candidates` combined by :meth:`choose`;
        None where no cell could be read."""
        if self.cfg.rank != "vote" and profiles is None:
            raise C2NPInputError("rank 'profile' needs the particles' pair profiles (use predict_particles)")
        if self.needs_noise and noise_angstrom is None:
            raise C2NPInputError("symmetric_margin_per_angstrom needs the particles' noise estimates "
                                 "(use predict_particles)")
        cands = self.candidates(descs, seed=seed, batch=batch, profiles=profiles, particles=particles)
        noise = [0.0] * len(cands) if noise_angstrom is None else list(noise_angstrom)
        return [self.choose(c, noise_angstrom=s) for c, s in zip(cands, noise, strict=True)]

    @property
    def needs_noise(self) -> bool:
        """Whether :meth:`choose` reads the particle's noise estimate."""
        return self.cfg.symmetric_margin_per_angstrom > 0

    def choose(self, cands: Sequence[Candidate], *, noise_angstrom: float = 0.0) -> InversePrediction | None:
        """The answer of one particle from its :meth:`candidates`: :func:`choose_candidate`
        with this configuration's rank, minimum pair distance and symmetric margins
        (``noise_angstrom``: the particle's :func:`position_noise_angstrom`)."""
        return choose_candidate(cands, rule=self.cfg.rank, min_pair_angstrom=self.cfg.min_pair_angstrom,
                                symmetric_margin=self.cfg.symmetric_margin,
                                symmetric_margin_rel=self.cfg.symmetric_margin_rel,
                                symmetric_margin_per_angstrom=self.cfg.symmetric_margin_per_angstrom,
                                noise_angstrom=noise_angstrom)

    def predict_particles(self, particles: Sequence[Particle], *, seed: int = 0, batch: int = 256
                          ) -> list[InversePrediction | None]:
        """Predictions for particles: :func:`describe` each (and its pair profile for
        ``rank="profile"``), then :meth:`predict_descriptors`."""
        descs = [describe(p) for p in particles]
        profiles = ([particle_pair_profile(p, d) for p, d in zip(particles, descs)]
                    if self.cfg.rank != "vote" else None)
        noise = [position_noise_angstrom(p) for p in particles] if self.needs_noise else None
        return self.predict_descriptors(descs, seed=seed, batch=batch, profiles=profiles, noise_angstrom=noise,
                                        particles=particles)
