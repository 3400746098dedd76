"""Write the space-group templates of a store's training cells into a generator folder
(``templates.json``; c2np.models.inverse.templates; decision record 0036).

    PYTHONPATH=src python reproduce/inverse-generators/templates.py out/strict.h5 pretrained/diffcsp-inverse

The templates come from ForwardTask(split="train") training examples, the pairs the generator
was fitted on (under protocol strict never a held-out material, checked). Prints one line per
template: space group, atoms per slot, Wyckoff letters, how many training materials share it.
"""

from __future__ import annotations

import argparse
import sys

from c2np.errors import C2NPInputError
from c2np.models.inverse.examples import build_templates
from c2np.models.inverse.templates import save_templates
from c2np.tasks import ForwardTask


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("folder", help="the generator folder to write templates.json into")
    args = ap.parse_args()
    try:
        templates = build_templates(ForwardTask.open(args.store, split="train", subset="full"))
        path = save_templates(templates, args.folder)
    except C2NPInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for t in templates:
        print(f"{t.spacegroup:4d} {t.composition} {''.join(t.wyckoffs)} {len(t.materials)} materials")
    print(f"{len(templates)} templates -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
