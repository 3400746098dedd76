"""``python -m c2np`` runs the command line."""

from c2np.cli import main

main()
