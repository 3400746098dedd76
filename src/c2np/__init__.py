"""c2np: the Crystal-to-Nanoparticle benchmark and toolkit.

Nothing is computed or loaded at import time; import the concept modules
(``c2np.cells``, ``c2np.carving``, ``c2np.orientations``, ``c2np.store`` ...) directly.
"""

__version__ = "0.1.0"
