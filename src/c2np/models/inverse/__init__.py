"""Task-2 (inverse) crystal generators: particle -> generated unit cells -> space group and
lattice. Importing this package imports nothing; PyTorch is imported only by the modules
that need it.

Modules, by concept:

* :mod:`~c2np.models.inverse.config` — :class:`GenConfig` and its names (torch-free);
* :mod:`~c2np.models.inverse.examples` — training pairs and templates of training cells;
* :mod:`~c2np.models.inverse.network` — the shared CSPNet-like denoiser;
* :mod:`~c2np.models.inverse.process` — the interface of a generative process, one per family:
  :mod:`~c2np.models.inverse.diffcsp`, :mod:`~c2np.models.inverse.flowmm`,
  :mod:`~c2np.models.inverse.mattergen`, :mod:`~c2np.models.inverse.cdvae`,
  :mod:`~c2np.models.inverse.adit`, found by name in :mod:`~c2np.models.inverse.registry`;
* :mod:`~c2np.models.inverse.sampler` — the network with its process (loss, sampling);
* :mod:`~c2np.models.inverse.generator` — :class:`CrystalGenerator`: candidates per particle,
  read-out, refinement and the choice of an answer;
* :mod:`~c2np.models.inverse.templates` — space-group templates and projections onto them;
* :mod:`~c2np.models.inverse.ranking` — pair profiles, their mismatch, profile refinement;
* :mod:`~c2np.models.inverse.readout` — the space group and lattice of a generated cell;
* :mod:`~c2np.models.inverse.choice` — candidates and the choice among them (torch-free);
* :mod:`~c2np.models.inverse.training` — :func:`fit_generator`;
* :mod:`~c2np.models.inverse.io` — saving and loading generator folders;
* :mod:`~c2np.models.inverse.pool` — pools of generators;
* :mod:`~c2np.models.inverse.predict` — task-2 prediction files of a generator folder;
* :mod:`~c2np.models.inverse.ablation` — explicit ablations of a loaded generator's settings.
"""
