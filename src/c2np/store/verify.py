"""Verifying a store: every base particle re-carved from its cell and compared, the recipe
table rebuilt from its protocol, the fingerprint recomputed (:func:`verify_store`); and the
check before scoring (:func:`require_intact`), once per process and store, remembered across
processes by the stamps of :mod:`c2np.store.stamps`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from c2np.errors import C2NPInputError, C2NPStoreError
from c2np.executor import Executor
from c2np.splits import build_recipes, get_protocol
from c2np.store.layout import BaseParticles, fingerprint
from c2np.store.read import DatasetStore
from c2np.store.shards import shard_base, shard_table
from c2np.store.write import carve_base_particles

__all__ = ["VerifyReport", "verify_store", "verify_opened", "require_intact"]


@dataclass(frozen=True)
class VerifyReport:
    """Outcome of :func:`verify_store`.

    Attributes:
        ok: everything matched.
        fingerprint_stored, fingerprint_recomputed: hex digests.
        n_base_checked: base particles re-carved and compared.
        max_position_error_angstrom: largest |stored - re-carved| over all atoms.
        recipes_match_protocol: the recipe table equals a fresh build of its protocol
            (None when it could not be rebuilt, e.g. an imported store).
        problems: one line per mismatch.
    """

    ok: bool
    fingerprint_stored: str
    fingerprint_recomputed: str
    n_base_checked: int
    max_position_error_angstrom: float
    recipes_match_protocol: bool | None
    problems: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        from dataclasses import asdict

        return asdict(self)


def verify_store(path: str | os.PathLike[str], *, position_tol_angstrom: float | None = None,
                 progress: bool = False, executor: Executor | None = None) -> VerifyReport:
    """Re-carve every base particle from its cell, compare with the store (species, positions,
    boundary margins, clip flags), rebuild the recipe table from its protocol, and recompute
    the fingerprint.

    Positions must equal the re-carved ones rounded to float32 (within 2 float32 ulps, so a
    shift of 1e-5 Å is caught), or agree within ``position_tol_angstrom`` when it is given.
    ``executor`` re-carves the base particles (:mod:`c2np.executor`; default: this process).
    """
    return verify_opened(DatasetStore.open(path), position_tol_angstrom=position_tol_angstrom,
                         progress=progress, executor=executor)


def verify_opened(store: DatasetStore, *, position_tol_angstrom: float | None = None,
                  progress: bool = False, check_recipes: bool = True,
                  executor: Executor | None = None) -> VerifyReport:
    """:func:`verify_store` of a store already opened; ``check_recipes=False`` skips the
    rebuild of the recipe table from its protocol (the fingerprint still covers the table)."""
    cells = [store.cells[m] for m in store.materials]
    table = store.recipes
    problems: list[str] = []
    recipes_match: bool | None = None
    if store.source == "carved" and check_recipes:
        try:
            fresh = build_recipes(cells, get_protocol(store.protocol),
                                  radii_angstrom=sorted(set(table.radius_angstrom.tolist())),
                                  centre_frac=table.centre_frac)
            recipes_match = fresh.canonical_bytes() == table.canonical_bytes()
            if not recipes_match:
                problems.append("recipe table differs from a fresh build of protocol "
                                f"{store.protocol!r}")
        except C2NPInputError as exc:
            problems.append(f"cannot rebuild recipes: {exc}")
            recipes_match = False
    if store.source == "carved":
        recarved = carve_base_particles(cells, table, progress=progress, executor=executor)
        max_err = 0.0
        rec_index = recarved.index()
        in_file = ([f"{e.file}: " for e in store.manifest.shards for _ in e.materials]
                   if store.manifest is not None else [""] * len(table.materials))
        for key, j in store._base_index.items():
            nums_s, pos_s = store.base.get(j)
            jj = rec_index.get(key)
            label = f"{in_file[key[0]]}{table.materials[key[0]]} R={key[1]}"
            if jj is None:
                problems.append(f"{label}: stored but not in the recipes")
                continue
            nums_c, pos_c = recarved.get(jj)
            if len(nums_c) != len(nums_s) or not np.array_equal(nums_c, nums_s):
                problems.append(f"{label}: {len(nums_s)} stored atoms vs {len(nums_c)} re-carved "
                                "(or species differ)")
                continue
            if len(pos_c):
                diff = np.abs(pos_s.astype(np.float64) - pos_c)
                err = float(diff.max())
                if position_tol_angstrom is None:
                    allowed = 2.0 * np.spacing(np.abs(pos_c).astype(np.float32)).astype(np.float64) + 1e-12
                    bad = bool(np.any(diff > allowed))
                else:
                    bad = err > position_tol_angstrom
            else:
                err, bad = 0.0, False
            max_err = max(max_err, err)
            if bad:
                problems.append(f"{label}: positions differ by up to {err:.3g} Å")
            m_s, m_c = float(store.base.boundary_margin_angstrom[j]), float(recarved.boundary_margin_angstrom[jj])
            if not abs(m_s - m_c) <= 1e-9:
                problems.append(f"{label}: boundary margin {m_s!r} Å stored, {m_c!r} Å re-carved")
            if bool(store.base.paper_supercell_clips[j]) != bool(recarved.paper_supercell_clips[jj]):
                problems.append(f"{label}: supercell clip flag {bool(store.base.paper_supercell_clips[j])} "
                                f"stored, {bool(recarved.paper_supercell_clips[jj])} re-carved")
        fp = _recomputed_fingerprint(store, recarved, problems)
        n_checked = len(store._base_index)
    else:
        max_err = float("nan")
        fp = _recomputed_fingerprint(store, store.base, problems)
        n_checked = 0
    if fp != store.fingerprint:
        problems.append(f"fingerprint mismatch: stored {store.fingerprint[:16]}…, recomputed {fp[:16]}…")
    return VerifyReport(ok=not problems, fingerprint_stored=store.fingerprint, fingerprint_recomputed=fp,
                        n_base_checked=n_checked, max_position_error_angstrom=max_err,
                        recipes_match_protocol=recipes_match, problems=tuple(problems))


def _recomputed_fingerprint(store: DatasetStore, base: BaseParticles, problems: list[str]) -> str:
    """The fingerprint of ``store`` with ``base`` for its base particles: the single-file one,
    or, for a sharded store, each shard's (a mismatch is a problem naming the shard file)
    joined by :func:`c2np.store.manifest.sharded_fingerprint`."""
    from c2np.store.manifest import sharded_fingerprint

    cells = [store.cells[m] for m in store.materials]
    if store.manifest is None:
        return fingerprint(cells, store.recipes, base)
    rows_fps = []
    m0 = 0
    for entry in store.manifest.shards:
        m1 = m0 + len(entry.materials)
        fp = fingerprint(cells[m0:m1], shard_table(store.recipes, m0, m1), shard_base(base, m0, m1))
        if fp != entry.fingerprint:
            problems.append(f"{entry.file}: shard fingerprint mismatch: recorded {entry.fingerprint[:16]}…, "
                            f"recomputed {fp[:16]}…")
        rows_fps.append((entry.row_start, entry.row_stop, fp))
        m0 = m1
    return sharded_fingerprint(rows_fps)


_INTACT: set[tuple[Any, ...]] = set()


def require_intact(store: DatasetStore, *, executor: Executor | None = None) -> None:
    """Refuse (:class:`C2NPStoreError`) a store that does not match its fingerprint, before it
    is used for scoring: the checks of :func:`verify_store` but the protocol rebuild (base
    particles re-carved, by ``executor`` when given, and compared; fingerprint recomputed). A
    store once found intact is not re-checked in this process while its files (inode, size,
    modification time) are unchanged, nor in a later process when a stamp of this machine's
    cache records the same file bytes (SHA-256), fingerprint and c2np code
    (:mod:`c2np.store.stamps`; ``C2NP_NO_STORE_STAMPS=1`` turns that off)."""
    files = store.files()
    key = (store.fingerprint, *((str(f.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
                                for f in files for st in (f.stat(),)))
    if key in _INTACT:
        return
    from c2np.fileio import file_sha256
    from c2np.store import stamps as store_stamps

    stamp = None
    if store_stamps.stamps_enabled():
        digests = [file_sha256(f) for f in files]
        stamp = store_stamps.store_key(store.fingerprint, digests)
        if store_stamps.has_stamp(stamp, store.fingerprint):
            _INTACT.add(key)
            return
    report = verify_opened(store, check_recipes=False, executor=executor)
    if not report.ok:
        shown = "; ".join(report.problems[:3]) + (f"; and {len(report.problems) - 3} more"
                                                  if len(report.problems) > 3 else "")
        raise C2NPStoreError(f"{store.path}: the store does not match its fingerprint (tampered or "
                             f"damaged; `c2np verify` lists every problem): {shown}")
    _INTACT.add(key)
    if stamp is not None:
        store_stamps.write_stamp(stamp, store.fingerprint, [str(f.resolve()) for f in files])
