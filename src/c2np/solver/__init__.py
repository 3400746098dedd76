"""The crystallographic inverse solver (task 2 reference, contract §7 and §9).

Given a finite particle (species and Cartesian positions in any frame and any order),
recover the bulk crystal it was cut from: lattice parameters of the standardized
conventional cell, space group, and the reconstructed unit cell.

:func:`solve` runs named steps, each a function of the previous steps' frozen records, with
every tolerance in one frozen :class:`SolverSettings` (details and limits in
``docs/explanation/solver.md``):

1. *Frame* (:mod:`~c2np.solver.frame`, :class:`ParticleFrame`). Positions about the
   centroid, their distance order and an element-keyed neighbour tree. The in-particle
   region is the convex hull of the atoms shrunk by ``boundary_margin_angstrom``: a
   translated atom is only asked to land on an atom when its image lies in that region, so
   atoms whose images fall outside the particle never count against a translation.
2. *Neighbour scale* (:mod:`~c2np.solver.neighbours`, :class:`NeighbourScale`). Same-element
   nearest-neighbour distances of the central atoms set the matching tolerance.
3. *Candidate translations* (:mod:`~c2np.solver.candidates`,
   :class:`CandidateTranslations`). Differences between atoms of the rarest element
   (origins: the few closest to the centre; in small particles all elements contribute),
   merged by distance and sorted by length. "Closest k atoms" cuts take whole distance
   shells, so no step depends on the frame or the atom order.
4. *Lattice search with its fallbacks* (:mod:`~c2np.solver.search`, :class:`LatticeSearch`).
   Each candidate ``t`` is scored on the central probe atoms of every element: the images
   ``x ± t`` inside the region must land on an atom of the same element, and their mean
   squared residual must match the best candidate's within sampling error (a true lattice
   vector leaves pure noise; a pseudo-translation of a distorted structure leaves the
   distortion too). Candidates are scored in order of length until three independent
   accepted vectors are found and a margin beyond them is covered (twice their length when
   they leave a residual: a superstructure's sub-cell). Small particles are searched again
   with a noise-sized margin, then exactly (every image in the hull, two images suffice);
   when only two translations are well supported, the third is the one-pair translation
   whose folded crystal is uniquely the most symmetric (:mod:`~c2np.solver.low_support`).
5. *Consolidation* (:mod:`~c2np.solver.consolidation`, :class:`ConsolidatedLattice`). An
   accepted vector that is not an integer combination of the basis is checked through the
   short vectors it implies and dropped if they fail; otherwise a search over triples finds
   the finer lattice. The basis is refined by least squares over all accepted translations
   and Niggli-reduced (moyopy).
6. *Site fit* (:mod:`~c2np.solver.sites`, :class:`SiteFit`). Every atom is folded into the
   cell and clustered per element with periodic distances. The lattice and the Cartesian
   site offsets are then refined jointly by linear least squares (``x_i = c_site + n_i · L``)
   over all assigned atoms; atoms are reassigned to their nearest site if any moved off,
   and refitted.
7. *Symmetry choice* (:mod:`~c2np.solver.symmetry`, :class:`SymmetryChoice`). moyopy runs
   over a sweep of tolerances from tight to loose, starting at a noise floor estimated from
   the site scatter. The answer is the space group of the tightest *plateau* (the first
   group found at two consecutive tolerances), with moyopy's standardized conventional
   cell at the tightest tolerance of that plateau. Sites absent from a small particle are
   restored by symmetry when that raises the symmetry.
8. *Confidence* (:mod:`~c2np.solver.confidence`, :class:`Confidence`) = explained fraction
   x stability of the space group over the sweep x repeat support x consistency of the
   accepted translations x site fit x completeness (sites seen, not restored; halved for a
   low-support lattice). A particle that is not one crystal gets either an error or a low
   confidence.
9. *Checks* (:mod:`~c2np.solver.verification`). The standardized cell must reproduce the
   particle (composition, density, one atom per site and cell, atoms on sites) or the answer
   is refused with the reason; where spglib finds another group at the reported tolerance the
   confidence is halved.
10. *Not a crystal* (:mod:`~c2np.solver.noncrystal`). Without a lattice or with a doubtful
    one, five-fold twinned (icosahedral, decahedral) and amorphous particles are refused with
    what was seen.
11. *Ranked answers* (:mod:`~c2np.solver.ranking`, ``solve(..., top_k=K)``).

Where the first search (translations up to 16 Å) finds no lattice, :mod:`~c2np.solver.reach`
searches with the rules of a strained or defective particle, then up to 0.56 x the
particle's diameter. The site fit reports the particle's mean lattice, its spread across the particle
(which sets the lowest symmetry tolerance) and the degree of chemical order.

Independent of the particle's position, orientation and atom order (up to floating-point
rounding). Bad input (too few atoms, non-finite positions, no lattice) raises
:class:`~c2np.errors.C2NPInputError`.
"""

from c2np.solver.candidates import CandidateTranslations
from c2np.solver.confidence import Confidence
from c2np.solver.consolidation import ConsolidatedLattice
from c2np.solver.frame import ParticleFrame
from c2np.solver.neighbours import NeighbourScale
from c2np.solver.noncrystal import NonCrystal, classify_noncrystal
from c2np.solver.pipeline import solve, solve_particle
from c2np.solver.ranking import RankedCandidate
from c2np.solver.reach import LatticePass, supported_reach_angstrom
from c2np.solver.result import SolverResult
from c2np.solver.search import LatticeSearch
from c2np.solver.settings import DEFAULT_SYMPREC_SWEEP_ANGSTROM, SolverSettings
from c2np.solver.sites import SiteFit
from c2np.solver.symmetry import SymmetryChoice
from c2np.solver.translations import AcceptedTranslations
from c2np.solver.verification import Verification, verify_cell

__all__ = [
    "DEFAULT_SYMPREC_SWEEP_ANGSTROM",
    "AcceptedTranslations",
    "CandidateTranslations",
    "Confidence",
    "ConsolidatedLattice",
    "LatticePass",
    "LatticeSearch",
    "NeighbourScale",
    "NonCrystal",
    "ParticleFrame",
    "RankedCandidate",
    "SiteFit",
    "SolverResult",
    "SolverSettings",
    "SymmetryChoice",
    "Verification",
    "classify_noncrystal",
    "solve",
    "solve_particle",
    "supported_reach_angstrom",
    "verify_cell",
]
