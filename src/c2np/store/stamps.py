"""Stamps of stores already verified on this machine, so that a store is re-carved once,
not before every scoring command (docs/decisions/0031-verified-store-stamps.md).

A stamp is a small JSON file in the c2np cache folder (``$C2NP_CACHE_DIR``, else
``$XDG_CACHE_HOME/c2np``, else ``~/.cache/c2np``), under ``verified/``, named by the SHA-256
of a key made of the store's fingerprint, the SHA-256 of every file of the store (the HDF5
file, or the manifest and its shards), a digest of the installed c2np source and the NumPy
and SciPy versions. It is written only after :func:`c2np.store.require_intact` has re-carved
the store and found it intact; a later process that finds a stamp for the same key skips the
re-carve. Any change of a store file's bytes, or of the code that carves and checks it,
changes the key, so the store is checked afresh. The stamp trusts the cache folder as much
as the installed package: whoever can write either can change what c2np reports.
``C2NP_NO_STORE_STAMPS=1`` turns stamps off (always re-carve); ``c2np verify`` never uses them.

A stamp that cannot be read, does not parse or names another fingerprint counts as absent;
one that cannot be written is not written (the check itself has passed either way).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["cache_folder", "stamps_enabled", "store_key", "has_stamp", "write_stamp"]

STAMP_VERSION = 1


def cache_folder() -> Path:
    """The c2np cache folder (not created here)."""
    own = os.environ.get("C2NP_CACHE_DIR")
    if own:
        return Path(own)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "c2np"


def stamps_enabled() -> bool:
    """False when ``C2NP_NO_STORE_STAMPS`` is set to anything but ``""`` or ``0``."""
    return os.environ.get("C2NP_NO_STORE_STAMPS", "") in ("", "0")


@functools.cache
def code_digest() -> str:
    """SHA-256 over the source files of the installed c2np package (names and bytes, in
    sorted order): any change of the code that carves or checks a store changes it."""
    root = Path(__file__).resolve().parents[1]  # the c2np package folder
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def store_key(fingerprint: str, file_digests: Sequence[str]) -> str:
    """The stamp key (hex SHA-256) of a store with ``fingerprint`` whose files have the
    SHA-256 digests ``file_digests`` (in the store's file order)."""
    import numpy
    import scipy

    text = json.dumps({"v": STAMP_VERSION, "fingerprint": fingerprint, "files": list(file_digests),
                       "code": code_digest(), "numpy": numpy.__version__, "scipy": scipy.__version__},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _stamp_path(key: str) -> Path:
    return cache_folder() / "verified" / f"{key}.json"


def has_stamp(key: str, fingerprint: str) -> bool:
    """True when a readable stamp for ``key`` records ``fingerprint``."""
    p = _stamp_path(key)
    try:
        if not p.is_file() or p.stat().st_size > 65536:
            return False
        from c2np.structured import parse_json

        data = parse_json(p.read_text(encoding="utf-8"), source=str(p))  # never a RecursionError
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("key") == key and data.get("fingerprint") == fingerprint


def write_stamp(key: str, fingerprint: str, files: Sequence[str]) -> bool:
    """Record that the store of ``key`` was verified (atomically: temp file, fsync,
    rename; honours the umask). Returns False, writing nothing, when the cache folder is
    not writable."""
    from c2np.errors import C2NPError
    from c2np.fileio import write_text

    body = json.dumps({"key": key, "fingerprint": fingerprint, "files": list(files),
                       "code": code_digest(), "stamp_version": STAMP_VERSION}, indent=1) + "\n"
    p = _stamp_path(key)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        write_text(p, body)
    except (OSError, C2NPError):  # a cache that cannot be written only costs a re-check
        return False
    return True
