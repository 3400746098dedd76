"""Rewrite the ``files`` block (SHA-256 of every file) of model cards after a deliberate change
to a model folder, e.g. an edited README; every other field of the card is kept as it is.

    PYTHONPATH=src python tools/update_card_digests.py pretrained/diffcsp-inverse [...]

Prints what changed and then the card's remaining problems (``c2np.models.cards.verify_card``:
priors, category, name, pool members); exits 1 when any card still has one.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import yaml

from c2np.errors import C2NPInputError
from c2np.fileio import write_text
from c2np.models.cards import CARD_FILE, card_document, file_digests, read_card, verify_card


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args(argv)
    failed = False
    for folder in args.folders:
        try:
            card = read_card(folder)
        except C2NPInputError as exc:
            print(exc, file=sys.stderr)
            return 2
        digests = file_digests(folder)
        changed = sorted(k for k in set(digests) | set(card.files) if digests.get(k) != card.files.get(k))
        card = dataclasses.replace(card, files=digests)
        text = yaml.safe_dump(card_document(card), sort_keys=False, width=100, allow_unicode=True)
        write_text(folder / CARD_FILE, text)
        print(f"{folder}: {', '.join(changed) if changed else 'no file changed'}")
        for problem in verify_card(read_card(folder)):
            print(f"  {problem}")
            failed = True
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
