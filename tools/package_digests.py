"""Digests of what the metrics, assignment and store code computes on fixed rows.

Used to check that moving code between modules changes no result: the digests recorded
before a move (``tests/test_package_moves.py``) must equal the digests after it, bit for
bit. Every input is fixed (shipped catalog cells, seeded generators); every output is
hashed exactly (floats by their bytes) and, for other platforms, rounded to 9 significant
digits. Only public import paths are used, so the same script runs before and after a move.

    PYTHONPATH=src python tools/package_digests.py          # print the digests as JSON
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

#: Shipped catalog materials of the four prototypes (Pm-3m, Pnma, R-3c, I4/mcm).
MATERIALS = ("CsCaH3", "CsMgH3", "KBaH3", "KCaH3")
RADII_ANGSTROM = (6, 8)


class _Digest:
    """Two running SHA-256 digests: exact (float bytes) and rounded (9 significant digits)."""

    def __init__(self) -> None:
        self.exact = hashlib.sha256()
        self.rounded = hashlib.sha256()

    def add(self, value: Any) -> None:
        for kind, h in (("exact", self.exact), ("rounded", self.rounded)):
            h.update(_encode(value, exact=kind == "exact"))
            h.update(b"\x1e")


def _encode(value: Any, *, exact: bool) -> bytes:
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        head = f"nd{a.dtype.str}{a.shape}".encode()
        if a.dtype.kind == "f" and not exact:
            return head + ",".join(f"{v:.9g}" for v in a.ravel().tolist()).encode()
        return head + a.tobytes()
    if isinstance(value, (bool, np.bool_)):
        return b"b1" if value else b"b0"
    if isinstance(value, (int, np.integer)):
        return f"i{int(value)}".encode()
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return (f"f{v.hex()}" if exact else f"f{v:.9g}").encode()
    if isinstance(value, str):
        return b"s" + value.encode()
    if value is None:
        return b"n"
    if isinstance(value, dict):
        return b"{" + b"|".join(_encode(k, exact=exact) + b":" + _encode(value[k], exact=exact)
                                for k in sorted(value)) + b"}"
    if isinstance(value, (list, tuple)):
        return b"[" + b"|".join(_encode(v, exact=exact) for v in value) + b"]"
    raise TypeError(f"cannot digest {type(value).__name__}")


def _scores(s: Any) -> dict[str, Any]:
    return {"values": s.values, "ok": s.ok, "reason": s.failure_reason, "details": s.details}


def _clouds(rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Point-set pairs (Å) that take every path of the assignment: nearest, dense, sparse
    (greedy / auction), aligned (shifted or scaled), unequal sizes."""
    lattice = np.stack(np.meshgrid(*[np.arange(-4, 5) * 2.0] * 3, indexing="ij"), -1).reshape(-1, 3)
    for n in (5, 40, 180, 400):
        a = rng.uniform(-8, 8, size=(n, 3))
        yield a, a + rng.normal(scale=0.05, size=a.shape)  # nearest (or dense) path
        yield a, rng.uniform(-8, 8, size=(n + n // 10, 3))  # unrelated sets
        yield a, a[rng.permutation(n)] * 1.3 + 2.0  # scaled and shifted: aligned path
    noisy = lattice + rng.normal(scale=0.3, size=lattice.shape)
    yield noisy, lattice  # ties broken by the auction
    yield lattice[: 500], lattice + rng.normal(scale=0.6, size=lattice.shape)


def assignment_digest(d: _Digest) -> None:
    from c2np.assignment import PointGrid, bounding_box, close_pairs, min_sq_assignment, nearest_neighbours

    rng = np.random.default_rng(20260101)
    for a, b in _clouds(rng):
        r = min_sq_assignment(a, b)
        d.add([r.sum_sq_angstrom2, r.lower_bound_angstrom2, r.n_pairs, r.exact, r.tolerance_angstrom2,
               r.method, r.rounds])
        dist, j = nearest_neighbours(a, b)
        d.add([dist, j])
        d.add(list(bounding_box(b)))
        grid = PointGrid.build(b, min_side=0.75)
        d.add([np.asarray(x) for x in close_pairs(a, grid, 0.7)])


def _cells() -> list[Any]:
    from c2np.catalog import get_cell

    return [get_cell(m) for m in MATERIALS]


def _h5_content(path: Path, d: _Digest) -> None:
    """Every attribute and dataset of an HDF5 file (the file's bytes hold creation times)."""
    import h5py

    def visit(name: str, obj: Any) -> None:
        d.add(name)
        d.add({k: _attr(v) for k, v in obj.attrs.items() if k != "c2np_version"})
        if isinstance(obj, h5py.Dataset):
            d.add(np.asarray(obj[()]))

    with h5py.File(path, "r") as f:
        d.add({k: _attr(v) for k, v in f.attrs.items() if k != "c2np_version"})
        f.visititems(visit)


def _attr(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, np.generic):
        return v.item()
    return v


def _read_back(store: Any, d: _Digest) -> None:
    d.add([store.protocol, store.source, store.fingerprint, list(store.materials)])
    t = store.recipes
    d.add([t.material_index, t.radius_angstrom, t.rotation_index, t.quaternion, t.split,
           list(t.heldout_materials), list(t.centre_frac)])
    b = store.base
    d.add([b.material_index, b.radius_angstrom, b.offsets, b.numbers, b.positions_angstrom,
           b.boundary_margin_angstrom, b.paper_supercell_clips])
    for row in range(0, len(t), max(1, len(t) // 40)):
        s = store.sample(row)
        d.add([s.row, s.sample_id, s.material, s.radius_angstrom, s.rotation_index, s.quaternion, s.split,
               s.particle.numbers,
               s.particle.positions_angstrom])


def store_digest(d: _Digest, folder: Path) -> Any:
    """Build a single-file and a two-shard store of :data:`MATERIALS`; returns the first, opened."""
    from c2np.store import DatasetStore, build_store, verify_store

    cells = _cells()
    single = build_store(cells, folder / "single.h5", radii_angstrom=list(RADII_ANGSTROM), progress=False)
    _h5_content(single, d)
    store = DatasetStore.open(single)
    _read_back(store, d)
    rep = verify_store(single)
    d.add([rep.ok, rep.fingerprint_stored, rep.fingerprint_recomputed, rep.n_base_checked,
           rep.max_position_error_angstrom, list(rep.problems)])
    manifest = build_store(cells, folder / "sharded.json", radii_angstrom=list(RADII_ANGSTROM),
                           progress=False, shards=2)
    sharded = DatasetStore.open(manifest)
    _read_back(sharded, d)
    for p in sharded.shard_paths:
        _h5_content(p, d)
    return store


def forward_digest(d: _Digest, store: Any) -> None:
    from c2np.metrics import ReferenceSummary, Scores, forward_metrics, pair_distance_counts

    rng = np.random.default_rng(7)
    rows = range(0, len(store.recipes), max(1, len(store.recipes) // 12))
    for row in rows:
        s = store.sample(row)
        zg, xg = s.particle.numbers, s.particle.positions_angstrom
        ref = ReferenceSummary.from_particle(zg, xg, radius_angstrom=float(s.radius_angstrom))
        d.add([ref.n_atoms, ref.pair_counts])
        keep = rng.random(len(zg)) >= 0.05
        cases = [(zg, xg + rng.normal(scale=0.05, size=xg.shape)),
                 (zg[keep], xg[keep] + rng.normal(scale=0.3, size=(int(keep.sum()), 3))),
                 (zg[rng.permutation(len(zg))], xg + 0.7),
                 (zg, rng.uniform(-s.radius_angstrom, s.radius_angstrom, size=xg.shape)),
                 (zg, np.full_like(xg, np.nan))]
        for zp, xp in cases:
            got: Scores = forward_metrics(zp, xp, zg, xg, reference=ref)
            d.add(_scores(got))
        d.add(pair_distance_counts(xg + rng.normal(scale=0.1, size=xg.shape), r_max_angstrom=10.0, n_bins=128))


def inverse_digest(d: _Digest) -> None:
    from c2np.metrics import inverse_metrics
    from c2np.tasks import inverse_target

    rng = np.random.default_rng(11)
    for cell in _cells():
        target = inverse_target(cell)
        p = target.params
        d.add([p, target.spacegroup])
        cases: list[tuple[Any, Any]] = [
            (p, target.spacegroup),
            (p + rng.normal(scale=0.05, size=6), target.spacegroup),
            (p[[1, 0, 2, 4, 3, 5]] * (1 + rng.normal(scale=0.01, size=6)), target.spacegroup),
            (p + rng.normal(scale=0.5, size=6), 225),
            ([np.nan] * 6, target.spacegroup),
            (p, None),
        ]
        for params, sg in cases:
            d.add(_scores(inverse_metrics(params, sg, target)))



def digests() -> dict[str, dict[str, str]]:
    """Section name -> {"exact": hex, "rounded": hex}."""
    out: dict[str, dict[str, str]] = {}
    d = _Digest()
    assignment_digest(d)
    out["assignment"] = {"exact": d.exact.hexdigest(), "rounded": d.rounded.hexdigest()}
    with tempfile.TemporaryDirectory() as tmp:
        d = _Digest()
        store = store_digest(d, Path(tmp))
        out["store"] = {"exact": d.exact.hexdigest(), "rounded": d.rounded.hexdigest()}
        d = _Digest()
        forward_digest(d, store)
        out["forward"] = {"exact": d.exact.hexdigest(), "rounded": d.rounded.hexdigest()}
    d = _Digest()
    inverse_digest(d)
    out["inverse"] = {"exact": d.exact.hexdigest(), "rounded": d.rounded.hexdigest()}
    return out


def platform_key() -> str:
    """Where exact digests are comparable: machine, Python, NumPy and SciPy versions."""
    import scipy

    return f"{platform.machine()} py{sys.version_info.major}.{sys.version_info.minor} " \
           f"numpy{np.__version__} scipy{scipy.__version__}"


if __name__ == "__main__":
    print(json.dumps({"platform": platform_key(), "digests": digests()}, indent=1))
