"""Build orchestration of the catalog: resumable, several processes, one ``catalog.json``.

:func:`build_catalog` relaxes compositions (:mod:`c2np.catalog.relaxation`) into an output
folder: ``{ID}.cif`` (standardized conventional cell) per material and ``catalog.json``
(provenance of every material, built or failed) rewritten after each one, atomically and
under a file lock in the output folder so that several processes can share the folder. The
shipped catalog (``c2np/data/catalog``) is exactly what it writes.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from c2np.catalog.hydrides import composition, material_ids, tolerance_factor
from c2np.catalog.prototypes import PROTOTYPE_SPACEGROUP, PROTOTYPES
from c2np.catalog.records import SCHEMA_VERSION, CatalogEntry, parse_catalog_document
from c2np.catalog.relaxation import (
    ENERGY_TIE_EV_PER_ATOM,
    MAX_VOLUME_RATIO,
    MIN_DISTANCE_ANGSTROM,
    POTENTIALS,
    load_potential,
    relax_material,
)
from c2np.catalog.structure_types import STRUCTURE_TYPES
from c2np.catalog.topology import BOND_RATIO, MAX_VOLUME_CHANGE
from c2np.cells import write_cif
from c2np.errors import C2NPInputError
from c2np.executor import Executor, LocalExecutor
from c2np.fileio import atomic_directory, read_text_bounded, write_text
from c2np.limits import check as check_limit
from c2np.sharding import SHARD_ENTRY_SCHEMA, check_shard_set, ids_sha256, shard_positions
from c2np.structured import read_json, validate
from c2np.terminal import printable

__all__ = ["LOCK_NAME", "build_catalog", "build_lock"]

#: Name of the lock file a build keeps in its output folder (hidden; never shipped).
LOCK_NAME = ".catalog.json.lock"


def _read_catalog_json(path: Path) -> dict[str, Any]:
    return parse_catalog_document(read_text_bounded(path), source=str(path))


def _catalog_document(entries: Iterable[CatalogEntry], *, potential: str, fmax: float,
                      started: str, expected: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``catalog.json`` document; ``expected`` (default: the 82 ABH3 ids) are the ids
    listed as not built when they have no entry."""
    entries = sorted(entries, key=lambda e: e.material_id)
    done = {e.material_id for e in entries}
    ok = [e.to_dict() for e in entries if e.status == "ok"]
    failed = [e.to_dict() for e in entries if e.status != "ok"]
    not_built = [{"material_id": m, "reason": "not built (build not run or interrupted)"}
                 for m in (material_ids() if expected is None else expected) if m not in done]
    return {
        "schema_version": SCHEMA_VERSION,
        "description": "c2np hydride catalog: perovskites ABH3 and related structure types relaxed "
                       "with a universal potential",
        "potential": potential,
        "fmax_ev_per_angstrom": fmax,
        "prototypes": {p: PROTOTYPE_SPACEGROUP[p] for p in PROTOTYPES},
        "structure_types": {t.name: {"prototype": t.prototype, "spacegroup": t.spacegroup}
                            for t in STRUCTURE_TYPES.values()},
        "topology_check": {"max_volume_change": MAX_VOLUME_CHANGE, "bond_ratio": BOND_RATIO,
                           "spacegroup_symprec_angstrom": 1e-3},
        "energy_tie_ev_per_atom": ENERGY_TIE_EV_PER_ATOM,
        "min_distance_angstrom": MIN_DISTANCE_ANGSTROM,
        "max_volume_ratio": MAX_VOLUME_RATIO,
        "build_started_utc": started,
        "n_materials": len(ok),
        "n_failures": len(failed),
        "n_not_built": len(not_built),
        "materials": ok,
        "failures": failed,
        "not_built": not_built,
    }


def _done_entries(out: Path, *, potential: str, fmax: float, prototypes: Sequence[str] | None,
                  started: str) -> tuple[dict[str, CatalogEntry], str]:
    """Entries already recorded in ``out/catalog.json`` that a build can keep (all of them
    when ``prototypes`` is None)."""
    cat_path = out / "catalog.json"
    done: dict[str, CatalogEntry] = {}
    if not cat_path.exists():
        return done, started
    data = _read_catalog_json(cat_path)
    if data.get("materials") or data.get("failures"):
        if data.get("potential") != potential or float(data.get("fmax_ev_per_angstrom", -1)) != fmax:
            raise C2NPInputError(
                f"{cat_path}: holds a build with potential {data.get('potential')!r} and fmax "
                f"{data.get('fmax_ev_per_angstrom')}; use another --out for potential {potential!r}, "
                f"fmax {fmax}")
    started = str(data.get("build_started_utc", started))
    for rec in list(data["materials"]) + list(data["failures"]):
        entry = CatalogEntry.from_dict(rec)
        if prototypes is None:
            done[entry.material_id] = entry
            continue
        if entry.status == "ok" and not (out / f"{entry.material_id}.cif").exists():
            continue  # CIF lost: rebuild it
        if entry.prototypes and tuple(p.prototype for p in entry.prototypes) != tuple(prototypes):
            continue  # built from other prototypes: redo
        done[entry.material_id] = entry
    return done, started


class build_lock:
    """Exclusive lock (``fcntl.flock``) around reading and rewriting ``catalog.json``, so
    that several build processes can share one output folder.

    The lock file is ``out/.catalog.json.lock`` (in the folder it guards, so nobody else
    can plant it), opened with ``O_NOFOLLOW`` (a symlink there is refused, never followed),
    created with mode 0o666 less the umask, and it must be a regular file. It stays after
    the build: removing a lock file others may be waiting on would let two holders in.
    """

    def __init__(self, out: Path) -> None:
        self.path = Path(out) / LOCK_NAME
        self.fd: int | None = None

    def __enter__(self) -> build_lock:
        import fcntl

        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.path, flags, 0o666)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise C2NPInputError(f"{self.path}: the catalog lock file is a symlink; refusing "
                                     f"to follow it (remove it)") from exc
            raise C2NPInputError(f"{self.path}: cannot open the catalog lock file "
                                 f"({exc.strerror})") from exc
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise C2NPInputError(f"{self.path}: the catalog lock file is not a regular file "
                                 f"(remove it)")
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        import fcntl

        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def build_catalog(out_dir: str | os.PathLike[str], potential: str = "chgnet",
                  only: Sequence[str] | None = None, fmax: float = 0.01, progress: bool = True,
                  *, prototypes: Sequence[str] = PROTOTYPES, max_steps: int = 1000,
                  optimizer: str = "FIRE", num_threads: int | None = 1,
                  workers: int = 1, executor: Executor | None = None,
                  shard: tuple[int, int] | None = None) -> list[CatalogEntry]:
    """Relax the catalog (or the ids in ``only``) into ``out_dir``; resumable.

    Writes ``{ID}.cif`` (standardized conventional cell) per material and rewrites
    ``catalog.json`` after each material, each atomically. Materials already recorded in
    ``out_dir/catalog.json`` (as built or failed, with the same potential and fmax) are
    skipped. A failing material is recorded with its reason and the build goes on.
    Several processes may build into the same folder at once (e.g. with ``only`` lists in
    different orders): ``catalog.json`` is re-read and merged under a file lock.
    ``prototypes`` restricts the prototypes tried (tests; the catalog uses all four).
    ``workers > 1`` relaxes that many materials at once in spawned processes (each with
    ``num_threads`` torch threads), sharing the folder as above; ``executor``
    (:mod:`c2np.executor`, e.g. a Dask cluster whose workers see ``out_dir`` on a shared file
    system) runs them instead, one material per task. ``shard = (i, n)``: only the materials
    at positions k of the id list with k % n == i, and a record ``catalog.shard.json``
    (:data:`SHARD_SCHEMA`) beside them; :func:`merge_catalogs` combines the n folders.
    Returns the entries of this call's materials, done now or before.
    """
    out = Path(out_dir)
    ids = material_ids() if only is None else list(dict.fromkeys(only))
    valid = set(material_ids())
    unknown = [m for m in ids if m not in valid]
    if unknown:
        raise C2NPInputError(f"unknown catalog ids {unknown}; valid ids: {', '.join(material_ids())}")
    if shard is not None:
        mine = [ids[int(k)] for k in shard_positions(len(ids), *shard)]
        entries = build_catalog(out, potential, mine, fmax, progress, prototypes=prototypes,
                                max_steps=max_steps, optimizer=optimizer, num_threads=num_threads,
                                workers=workers, executor=executor) if mine else []
        record = {"schema": SHARD_SCHEMA, "shard": {"index": int(shard[0]), "count": int(shard[1])},
                  "run": _run_identity(ids, potential=potential, fmax=fmax, prototypes=prototypes,
                                       max_steps=max_steps, optimizer=optimizer),
                  "n_rows": len(ids), "materials": mine}
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / SHARD_RECORD, json.dumps(record, indent=1) + "\n")
        return entries
    if potential not in POTENTIALS:
        raise C2NPInputError(f"unknown potential {potential!r}; valid: {', '.join(POTENTIALS)}")
    if not fmax > 0:
        raise C2NPInputError(f"fmax must be > 0 eV/Å, got {fmax}")
    out.mkdir(parents=True, exist_ok=True)
    cat_path = out / "catalog.json"
    done: dict[str, CatalogEntry] = {}
    started = datetime.now(UTC).isoformat(timespec="seconds")
    with build_lock(out):
        done, started = _done_entries(out, potential=potential, fmax=fmax, prototypes=prototypes,
                                      started=started)
    todo = [m for m in ids if m not in done]
    if workers < 1:
        raise C2NPInputError(f"workers must be >= 1, got {workers}")
    check_limit("workers", workers, what="catalog build workers")
    if (executor is not None or workers > 1) and len(todo) > 1:
        return _build_in_processes(out, ids, todo, workers, started, progress=progress, executor=executor,
                                   potential=potential, fmax=fmax, prototypes=tuple(prototypes),
                                   max_steps=max_steps, optimizer=optimizer, num_threads=num_threads)
    if todo:
        import torch

        if num_threads is not None:
            torch.set_num_threads(int(num_threads))
        load_potential(potential)
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo) * len(prototypes), desc="catalog", unit="relax")
    try:
        for mid in todo:
            with build_lock(out):  # another process sharing the folder may have done it
                others, _ = _done_entries(out, potential=potential, fmax=fmax, prototypes=prototypes,
                                          started=started)
            if mid in others:
                done[mid] = others[mid]
                if bar is not None:
                    bar.update(len(prototypes))
                continue
            if bar is not None:
                bar.set_postfix_str(mid)
            try:
                entry, cell = relax_material(mid, potential=potential, prototypes=prototypes,
                                             fmax_ev_per_angstrom=fmax,
                                             max_steps=max_steps, optimizer=optimizer,
                                             on_prototype_done=(lambda _r: bar.update(1)) if bar else None)
            except Exception as exc:  # recorded as a failure; the build goes on
                comp = composition(mid)
                entry = CatalogEntry(mid, mid, comp.a_site, comp.b_site, "failed",
                                     f"{type(exc).__name__}: {exc}", None, {}, None, None, None, None,
                                     None, None, None, None, None, tolerance_factor(comp), potential, "",
                                     fmax, optimizer.upper(), max_steps, "", 0.0, ())
                cell = None
            if cell is not None:
                write_cif(cell, out / f"{mid}.cif")
            done[mid] = entry
            with build_lock(out):  # merge with what other processes recorded meanwhile
                merged, _ = _done_entries(out, potential=potential, fmax=fmax, prototypes=None,
                                          started=started)
                merged[mid] = entry
                write_text(cat_path, json.dumps(_catalog_document(
                    merged.values(), potential=potential, fmax=fmax, started=started), indent=1) + "\n")
    finally:
        if bar is not None:
            bar.close()
    if not cat_path.exists():
        write_text(cat_path, json.dumps(_catalog_document(done.values(), potential=potential,
                                                                  fmax=fmax, started=started), indent=1) + "\n")
    return [done[m] for m in ids]


#: Schema and file name of the record of ``catalog build --shard I/N``.
SHARD_SCHEMA = "c2np.catalog-shard/1"
SHARD_RECORD = "catalog.shard.json"

#: The schema (:mod:`c2np.structured`) of a shard record: what the merge reads, typed; the
#: material ids follow the safe-name rule (they become file names).
SHARD_RECORD_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["schema", "shard", "run", "n_rows", "materials"],
    "properties": {
        "schema": {"const": SHARD_SCHEMA}, "shard": SHARD_ENTRY_SCHEMA,
        "run": {"type": "object", "required": ["potential", "fmax"],
                "properties": {"potential": {"type": "string", "maxLength": 100},
                               "fmax": {"type": "number", "exclusiveMinimum": 0}}},
        "n_rows": {"type": "integer", "minimum": 0, "maximum": 10_000_000},
        "materials": {"type": "array", "items": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._+\-]{0,127}$"}},
    },
}


def _run_identity(ids: Sequence[str], **settings: Any) -> dict[str, Any]:
    """What makes two shards parts of one catalog build: the settings and the id list."""
    return {**{k: (list(v) if isinstance(v, tuple) else v) for k, v in settings.items()},
            "ids_sha256": ids_sha256(list(ids))}


def merge_catalogs(parts: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str]) -> list[CatalogEntry]:
    """Combine the folders of all shards of one ``catalog build --shard I/N`` into ``out_dir``
    (absent or empty): every material's CIF and one ``catalog.json`` with the entries of one
    build (only the start time is the earliest shard's). A shard of another build, given twice,
    missing, or not finished (a material of its share not recorded) is bad input."""
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise C2NPInputError(f"{out}: already exists and is not an empty folder; choose another -o")
    docs = []
    for p in map(Path, parts):
        rec_path = p / SHARD_RECORD
        if not rec_path.is_file():
            raise C2NPInputError(f"{p}: no {SHARD_RECORD} (not a folder of catalog build --shard I/N)")
        doc = read_json(rec_path, what="catalog shard record")
        if not isinstance(doc, dict) or doc.get("schema") != SHARD_SCHEMA:
            raise C2NPInputError(f"{printable(rec_path)}: not a catalog shard record ({SHARD_SCHEMA!r})")
        validate(doc, SHARD_RECORD_SCHEMA, source=printable(rec_path))
        docs.append((str(p), doc))
    count = check_shard_set(docs, keys=("schema", "run", "n_rows"), what="catalog merge")
    run = docs[0][1]["run"]
    n = int(docs[0][1]["n_rows"])
    ids: list[str | None] = [None] * n
    entries: dict[str, CatalogEntry] = {}
    started: list[str] = []
    for path, doc in docs:
        i = int(doc["shard"]["index"])
        positions = shard_positions(n, i, count)
        if len(positions) != len(doc["materials"]):
            raise C2NPInputError(f"catalog merge: {path}: its materials are not those of shard {i}/{count}")
        for k, mid in zip(positions, doc["materials"]):
            ids[int(k)] = str(mid)
        got, st = _done_entries(Path(path), potential=run["potential"], fmax=float(run["fmax"]),
                                prototypes=None, started="")
        started.append(st)
        missing = [m for m in doc["materials"] if m not in got]
        if missing:
            raise C2NPInputError(f"catalog merge: {path}: shard {i}/{count} is not finished ({missing} "
                                 "not built); rerun its catalog build (it resumes)")
        entries.update({m: got[m] for m in doc["materials"]})
    if _run_identity([m for m in ids if m is not None], **{k: v for k, v in run.items() if k != "ids_sha256"}) != run:
        raise C2NPInputError("catalog merge: the shards' materials are not the build's id list")
    with atomic_directory(out) as tmp:  # all or nothing
        for path, doc in docs:
            for mid in doc["materials"]:
                if entries[mid].status == "ok":
                    write_text(tmp / f"{mid}.cif", read_text_bounded(Path(path) / f"{mid}.cif"))
        write_text(tmp / "catalog.json", json.dumps(_catalog_document(
            entries.values(), potential=run["potential"], fmax=float(run["fmax"]),
            started=min(s for s in started if s) if any(started) else ""), indent=1) + "\n")
    return [entries[m] for m in ids if m is not None]


_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _build_one(_: Any, job: tuple[str, str, dict[str, Any]]) -> str:
    """Worker of :func:`_build_in_processes`: build one material into the shared folder."""
    out, mid, kwargs = job
    build_catalog(out, only=[mid], progress=False, workers=1, **kwargs)
    return mid


def _build_in_processes(out: Path, ids: list[str], todo: list[str], workers: int, started: str,
                        *, progress: bool, executor: Executor | None = None,
                        **kwargs: Any) -> list[CatalogEntry]:
    """:func:`build_catalog` of ``todo`` through ``executor`` (default: ``workers`` spawned
    local processes), one material per task; every worker merges its result into
    ``out/catalog.json`` under the lock."""
    cat_path = out / "catalog.json"
    with build_lock(out):  # one build start time for every worker
        if not cat_path.exists():
            write_text(cat_path, json.dumps(_catalog_document(
                [], potential=kwargs["potential"], fmax=kwargs["fmax"], started=started), indent=1) + "\n")
    bar = None
    if progress:
        from tqdm import tqdm

        n_shown = executor.workers if executor is not None else workers
        bar = tqdm(total=len(todo), desc=f"catalog ({n_shown} workers)", unit="material")
    jobs = [(str(out), mid, kwargs) for mid in todo]
    # Spawned workers read these at import: without them each worker's BLAS/OpenMP pools
    # start one thread per CPU, and N workers oversubscribe the machine (measured: 2
    # workers on 2 cores ran at about half speed).
    threads = str(kwargs.get("num_threads") or 1)
    saved = {k: os.environ.get(k) for k in _THREAD_ENV}
    os.environ.update({k: threads for k in _THREAD_ENV})
    ex = executor if executor is not None else LocalExecutor(min(workers, len(todo)), start_method="spawn")
    try:
        for part in ex.map(_build_one, jobs, chunk=1):
            if bar is not None:
                bar.set_postfix_str(part[0])
                bar.update(1)
    finally:
        if executor is None:
            ex.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if bar is not None:
            bar.close()
    with build_lock(out):
        done, _ = _done_entries(out, potential=kwargs["potential"], fmax=kwargs["fmax"],
                                prototypes=None, started=started)
    return [done[m] for m in ids]
