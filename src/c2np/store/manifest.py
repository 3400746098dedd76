"""The manifest of a sharded dataset store: its schema, its shard names, its fingerprint, and
the checks of its files (contract §5; docs/explanation/dataset.md, "Sharded stores").

A sharded store is one JSON manifest plus K HDF5 shard files beside it. Each shard is a
``c2np-store`` file holding a contiguous run of materials (in the store's material order):
their unit cells, their recipe rows and their base particles. The manifest lists each
shard's file name, byte size, SHA-256 of its bytes, content fingerprint, row range and
material set.

Fingerprint of a sharded store (hex SHA-256)::

    sha256(b"c2np-sharded-fingerprint-v1\\0" + json.dumps({"shards": [[row_start, row_stop,
           shard_fingerprint], ...]}, separators=(",", ":")).encode("ascii"))

where ``shard_fingerprint`` is the single-file fingerprint (:func:`c2np.store.fingerprint`)
of the shard's own cells, recipe rows and base particles. The one shard of a one-shard store
therefore has exactly the fingerprint F of the single-file store of the same build, and the
store's fingerprint is ``sharded_fingerprint([(0, n, F)])``.

Pure bookkeeping: nothing here reads HDF5.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError, C2NPStoreError

__all__ = ["MANIFEST_SCHEMA", "ShardEntry", "Manifest", "shard_file_name", "shard_glob",
           "sharded_fingerprint", "partition_materials", "read_manifest", "check_shard_files",
           "manifest_json", "manifest_path_for", "find_manifest", "is_manifest_file"]

MANIFEST_SCHEMA = "c2np.store-manifest/1"
_FP_DOMAIN = b"c2np-sharded-fingerprint-v1\0"
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ShardEntry:
    """One shard as the manifest lists it.

    Attributes:
        index: position 0..K-1.
        file: file name (in the manifest's folder), :func:`shard_file_name`.
        bytes: file size in bytes.
        sha256: hex digest of the file's bytes.
        fingerprint: content fingerprint of the shard (the single-file fingerprint of its data).
        row_start, row_stop: its recipe rows ``[row_start, row_stop)`` in the store.
        materials: its material ids, in store order.
        n_base_particles, n_base_atoms: its (material, R) base particles and their atoms.
        per_split: samples per split.
    """

    index: int
    file: str
    bytes: int
    sha256: str
    fingerprint: str
    row_start: int
    row_stop: int
    materials: tuple[str, ...]
    n_base_particles: int
    n_base_atoms: int
    per_split: dict[str, int] = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        """Recipe rows in this shard."""
        return self.row_stop - self.row_start

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the manifest's shard entry)."""
        return {"index": self.index, "file": self.file, "bytes": self.bytes, "sha256": self.sha256,
                "fingerprint": self.fingerprint, "rows": [self.row_start, self.row_stop],
                "n_samples": self.n_samples, "materials": list(self.materials),
                "n_base_particles": self.n_base_particles, "n_base_atoms": self.n_base_atoms,
                "per_split": dict(self.per_split)}


@dataclass(frozen=True)
class Manifest:
    """A sharded store's manifest (see the module doc).

    Attributes:
        name: the store name; shard files are ``{name}-shard-IIIII-of-KKKKK.h5``.
        fingerprint: the store fingerprint, :func:`sharded_fingerprint` of the shards.
        protocol, source, c2np_version: provenance.
        centre_frac: (3,) carving centre (fractional).
        n_samples: recipe rows over all shards.
        heldout_materials: materials reserved for task-2 testing.
        summary: the recipe table's summary (sizes, orientation separations).
        shards: the shard entries, in order.
    """

    name: str
    fingerprint: str
    protocol: str
    source: str
    c2np_version: str
    centre_frac: tuple[float, float, float]
    n_samples: int
    heldout_materials: tuple[str, ...]
    summary: dict[str, Any]
    shards: tuple[ShardEntry, ...]


def shard_file_name(name: str, index: int, count: int) -> str:
    """File name of shard ``index`` of ``count`` of the store ``name`` (a safe name)."""
    return f"{name}-shard-{index:05d}-of-{count:05d}.h5"


def shard_glob(name: str) -> str:
    """Glob pattern matching every shard file name of the store ``name`` (any index, any K)."""
    return f"{glob.escape(name)}-shard-*.h5"


def sharded_fingerprint(rows_and_fingerprints: Sequence[tuple[int, int, str]]) -> str:
    """The store fingerprint over ``(row_start, row_stop, shard_fingerprint)`` per shard, in
    order (module doc). Hex SHA-256."""
    import hashlib

    body = json.dumps({"shards": [[int(a), int(b), str(fp)] for a, b, fp in rows_and_fingerprints]},
                      separators=(",", ":"))
    return hashlib.sha256(_FP_DOMAIN + body.encode("ascii")).hexdigest()


def partition_materials(weights: Sequence[float], count: int) -> list[tuple[int, int]]:
    """Cut materials ``0..m-1`` (in order) into ``count`` contiguous non-empty runs
    ``[start, stop)`` of about equal total weight (e.g. estimated bytes). Deterministic."""
    m = len(weights)
    if not 1 <= count <= m:
        raise C2NPInputError(f"--shards {count}: a shard holds whole materials, so 1 <= K <= {m} "
                             f"(the number of materials)")
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0) + 1e-9  # every material weighs
    cum = np.cumsum(w)
    total = float(cum[-1])
    cuts = [0]
    for j in range(1, count):
        # first material boundary at or past j/K of the weight, leaving room for the rest
        at = int(np.searchsorted(cum, j * total / count, side="left")) + 1
        at = min(max(at, cuts[-1] + 1), m - (count - j))
        cuts.append(at)
    cuts.append(m)
    return [(cuts[i], cuts[i + 1]) for i in range(count)]


def manifest_path_for(out: str | os.PathLike[str]) -> Path:
    """The manifest file for ``build --shards -o OUT``: OUT itself when it ends in ``.json``,
    else ``OUT/store.json`` (OUT is a folder)."""
    p = Path(out)
    if p.suffix.lower() == ".json":
        return p
    if p.suffix.lower() in (".h5", ".hdf5"):
        raise C2NPInputError(f"{p}: a sharded store is a manifest plus shard files; give -o NAME.json "
                             "or a folder")
    return p / "store.json"


def manifest_json(manifest: Manifest) -> str:
    """The manifest's JSON text (stable key order, one trailing newline)."""
    doc = {
        "schema": MANIFEST_SCHEMA, "format": "c2np-store", "format_version": 1,
        "name": manifest.name, "fingerprint": manifest.fingerprint,
        "fingerprint_definition": "sha256(b'c2np-sharded-fingerprint-v1\\0' + json.dumps({'shards': "
                                  "[[row_start, row_stop, shard_fingerprint], ...]}, separators=(',', ':')))",
        "protocol": manifest.protocol, "source": manifest.source, "c2np_version": manifest.c2np_version,
        "centre_frac": list(manifest.centre_frac), "n_shards": len(manifest.shards),
        "n_samples": manifest.n_samples,
        "n_materials": sum(len(s.materials) for s in manifest.shards),
        "n_base_particles": sum(s.n_base_particles for s in manifest.shards),
        "n_base_atoms": sum(s.n_base_atoms for s in manifest.shards),
        "heldout_materials": list(manifest.heldout_materials), "summary": manifest.summary,
        "shards": [s.to_dict() for s in manifest.shards],
    }
    return json.dumps(doc, indent=1, default=float) + "\n"


# --- reading and checking -----------------------------------------------------------------
def is_manifest_file(path: Path) -> bool:
    """True when ``path`` is a regular file that looks like a JSON manifest (it ends in
    ``.json``, or its first non-blank byte is ``{``); HDF5 files start with a binary signature."""
    if path.suffix.lower() == ".json":
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(64).lstrip()
    except OSError:
        return False
    return head.startswith(b"{")


def find_manifest(folder: Path) -> Path:
    """The one store manifest in ``folder`` (a ``*.json`` whose schema is the manifest's)."""
    found = []
    for cand in sorted(folder.glob("*.json")):
        try:
            if cand.is_file() and cand.stat().st_size <= 1 << 30 and _schema_of(cand) == MANIFEST_SCHEMA:
                found.append(cand)
        except OSError:
            continue
    if not found:
        raise C2NPStoreError(f"{folder}: is a folder without a c2np store manifest "
                             f"(no *.json with schema {MANIFEST_SCHEMA!r})")
    if len(found) > 1:
        raise C2NPStoreError(f"{folder}: holds several store manifests ({', '.join(p.name for p in found)}); "
                             "give one of them")
    return found[0]


def _schema_of(path: Path) -> Any:
    from c2np.limits import effective

    if path.stat().st_size > effective("manifest_bytes"):
        return None
    from c2np.structured import parse_json

    try:  # the guarded parser: nesting or a huge integer is a refusal, never a RecursionError
        doc = parse_json(path.read_text(encoding="utf-8"), source=str(path), finite=False)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return doc.get("schema") if isinstance(doc, dict) else None


def _need(doc: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in doc:
        raise ValueError(f"{where} lacks {key!r}")
    v = doc[key]
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise ValueError(f"{where}: {key!r} has the wrong type ({type(v).__name__})")
    return v


def read_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate a manifest: schema, names (safe-name rule), shard list (contiguous
    rows, one entry per index, names as :func:`shard_file_name` gives), counts within the
    limits ``manifest_bytes`` and ``store_shards``, and its fingerprint recomputed from the
    shard entries. Any problem is :class:`C2NPStoreError` naming the file."""
    from c2np.limits import check as check_limit
    from c2np.names import check_safe_name

    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise C2NPStoreError(f"{p}: cannot read the store manifest ({exc.strerror or exc})") from None
    check_limit("manifest_bytes", size, what=f"{p}: store manifest")
    from c2np.structured import parse_json

    try:
        doc = parse_json(p.read_text(encoding="utf-8"), source=str(p), what="store manifest", finite=False)
    except UnicodeDecodeError as exc:
        raise C2NPStoreError(f"{p}: store manifest is not UTF-8 ({exc})") from None
    except C2NPInputError as exc:
        raise C2NPStoreError(str(exc)) from None
    except OSError as exc:
        raise C2NPStoreError(f"{p}: cannot read the store manifest ({exc.strerror or exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != MANIFEST_SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise C2NPStoreError(f"{p}: not a c2np store manifest (schema {got!r}, expected {MANIFEST_SCHEMA!r})")
    try:
        name = check_safe_name(_need(doc, "name", str, "manifest"), what="store name")
        shards_doc = _need(doc, "shards", list, "manifest")
        check_limit("store_shards", len(shards_doc), what=f"{p}: shards listed")
        if not shards_doc:
            raise ValueError("lists no shards")
        k = len(shards_doc)
        entries = []
        row = 0
        seen_materials: set[str] = set()
        for i, s in enumerate(shards_doc):
            where = f"shard entry {i}"
            if not isinstance(s, dict):
                raise ValueError(f"{where} is not an object")
            if _need(s, "index", int, where) != i:
                raise ValueError(f"{where} has index {s['index']}")
            file = check_safe_name(_need(s, "file", str, where), what="shard file name")
            if file != shard_file_name(name, i, k):
                raise ValueError(f"{where} names the file {file!r}; shard {i} of {k} of store "
                                 f"{name!r} is {shard_file_name(name, i, k)!r}")
            rows = _need(s, "rows", list, where)
            if len(rows) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in rows) \
                    or rows[0] != row or rows[1] < rows[0]:
                raise ValueError(f"{where}: rows {rows!r} do not continue at row {row}")
            row = rows[1]
            mats = _need(s, "materials", list, where)
            if not mats:
                raise ValueError(f"{where} lists no materials")
            for m in mats:
                check_safe_name(m)
                if m in seen_materials:
                    raise ValueError(f"{where}: material {m!r} is in two shards")
                seen_materials.add(m)
            digests = [_need(s, key, str, where) for key in ("sha256", "fingerprint")]
            if not all(_HEX64.fullmatch(d) for d in digests):
                raise ValueError(f"{where}: sha256 and fingerprint must be 64 lower-case hex digits")
            counts = [_need(s, key, int, where) for key in ("bytes", "n_base_particles", "n_base_atoms")]
            if min(counts) < 0:
                raise ValueError(f"{where}: negative sizes")
            per_split = s.get("per_split", {})
            if not isinstance(per_split, dict) or not all(isinstance(v, int) for v in per_split.values()):
                raise ValueError(f"{where}: per_split is not a table of counts")
            entries.append(ShardEntry(index=i, file=file, bytes=counts[0], sha256=digests[0],
                                      fingerprint=digests[1], row_start=rows[0], row_stop=rows[1],
                                      materials=tuple(mats), n_base_particles=counts[1],
                                      n_base_atoms=counts[2], per_split=dict(per_split)))
        n = _need(doc, "n_samples", int, "manifest")
        if n != row:
            raise ValueError(f"n_samples is {n} but the shards hold {row} rows")
        centre = _need(doc, "centre_frac", list, "manifest")
        if len(centre) != 3 or not all(isinstance(x, (int, float)) and np.isfinite(x) for x in centre):
            raise ValueError("centre_frac is not 3 finite numbers")
        heldout = _need(doc, "heldout_materials", list, "manifest")
        if not all(isinstance(m, str) and m in seen_materials for m in heldout):
            raise ValueError("heldout_materials names materials the shards do not hold")
        summary = doc.get("summary", {})
        if not isinstance(summary, dict):
            raise ValueError("summary is not an object")
        fp = _need(doc, "fingerprint", str, "manifest")
        manifest = Manifest(name=name, fingerprint=fp, protocol=_need(doc, "protocol", str, "manifest"),
                            source=_need(doc, "source", str, "manifest"),
                            c2np_version=str(doc.get("c2np_version", "")),
                            centre_frac=(float(centre[0]), float(centre[1]), float(centre[2])),
                            n_samples=n, heldout_materials=tuple(heldout), summary=summary,
                            shards=tuple(entries))
    except (ValueError, C2NPInputError) as exc:
        raise C2NPStoreError(f"{p}: bad store manifest: {exc}") from None
    expected = sharded_fingerprint([(s.row_start, s.row_stop, s.fingerprint) for s in entries])
    if manifest.fingerprint != expected:
        raise C2NPStoreError(f"{p}: the manifest's fingerprint {manifest.fingerprint[:16]}… is not the one of "
                             f"its shard list ({expected[:16]}…): the manifest was edited")
    return manifest


def check_shard_files(manifest_path: Path, manifest: Manifest) -> list[Path]:
    """The shard files of ``manifest``, after checking that each listed one exists with its
    recorded size and SHA-256 and that no other shard file of this store name lies beside
    it (a leftover, a copy or a renamed shard). Returns their paths in order."""
    from c2np.fileio import file_sha256

    folder = manifest_path.parent
    paths = [folder / s.file for s in manifest.shards]
    k = len(manifest.shards)
    for s, sp in zip(manifest.shards, paths):
        if not sp.is_file():
            raise C2NPStoreError(f"{sp}: shard {s.index} of {k} listed in {manifest_path} is missing "
                                 "(deleted, renamed or not copied)")
    listed = {s.file for s in manifest.shards}
    extra = sorted(c.name for c in folder.glob(shard_glob(manifest.name)) if c.name not in listed)
    if extra:
        raise C2NPStoreError(f"{folder / extra[0]}: a shard file of store {manifest.name!r} that "
                             f"{manifest_path} does not list (a leftover, a copy or a renamed shard; "
                             f"remove it or rebuild){f'; and {len(extra) - 1} more' if len(extra) > 1 else ''}")
    for s, sp in zip(manifest.shards, paths):
        size = sp.stat().st_size
        if size != s.bytes:
            raise C2NPStoreError(f"{sp}: {size:,} bytes, but {manifest_path} records {s.bytes:,} "
                                 "(truncated, tampered or replaced)")
        digest = file_sha256(sp)
        if digest != s.sha256:
            raise C2NPStoreError(f"{sp}: sha256 {digest[:16]}… differs from {s.sha256[:16]}… recorded in "
                                 f"{manifest_path} (tampered or replaced)")
    return paths
