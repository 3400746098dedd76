"""The one safe-name rule for everything that becomes a path (material ids, CIF names, the
material part of sample ids).

A safe name is 1 to 128 ASCII characters from ``A-Z a-z 0-9 . _ + -``, starting with a
letter or digit. So it can never be absolute, contain a separator or ``..``, start with a
dot (hidden) or a dash (an option), hold a control character or a newline (which would
corrupt extxyz comment lines), or depend on a file system's Unicode normalisation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from c2np.errors import C2NPInputError

__all__ = ["MAX_NAME_LENGTH", "is_safe_name", "check_safe_name", "check_distinct_names"]

MAX_NAME_LENGTH = 128
_SAFE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._+\-]{{0,{MAX_NAME_LENGTH - 1}}}")


def is_safe_name(name: object) -> bool:
    """True when ``name`` is a string that passes the safe-name rule."""
    return isinstance(name, str) and _SAFE.fullmatch(name) is not None


def check_safe_name(name: object, *, what: str = "material id") -> str:
    """``name`` itself when it passes the safe-name rule; otherwise :class:`C2NPInputError`
    saying which rule it breaks (``what`` names the kind of name in the message)."""
    if is_safe_name(name):
        return name  # type: ignore[return-value]
    if not isinstance(name, str):
        raise C2NPInputError(f"{what} {name!r} is not a string")
    if not name:
        why = "it is empty"
    elif len(name) > MAX_NAME_LENGTH:
        why = f"it is longer than {MAX_NAME_LENGTH} characters"
    elif not name.isascii():
        why = "it has non-ASCII characters"
    elif not name[0].isalnum():
        why = "it must start with a letter or a digit"
    else:
        bad = sorted({ch for ch in name if not (ch.isalnum() or ch in "._+-")})
        why = "it contains " + ", ".join(repr(ch) for ch in bad)
    raise C2NPInputError(f"{what} {name!r} is not a safe name ({why}); names that become paths "
                         f"use only A-Z a-z 0-9 . _ + - and start with a letter or digit")


def check_distinct_names(names: Iterable[str], *, what: str = "material ids") -> None:
    """Refuse names that coincide when case is ignored (they would be one file on a
    case-insensitive file system)."""
    seen: dict[str, str] = {}
    clashes: list[str] = []
    for name in names:
        key = name.casefold()
        if key in seen and seen[key] != name:
            clashes.append(f"{seen[key]!r} and {name!r}")
        seen.setdefault(key, name)
    if clashes:
        raise C2NPInputError(f"{what} differ only in case: {', '.join(clashes[:5])}")
