import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

import c2np.carving as carving
from c2np.carving import canonical_order, carve, check_quaternion, interplanar_spacings
from c2np.cells import UnitCell
from c2np.errors import C2NPInputError


def brute_force(cell: UnitCell, radius: float, centre_frac: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Independent enumeration: a generous cube of translations, no pruning."""
    n = int(np.ceil(radius / interplanar_spacings(cell.lattice_angstrom).min())) + 3
    rng = np.arange(-n, n + 1)
    t = np.stack(np.meshgrid(rng, rng, rng, indexing="ij"), -1).reshape(-1, 3)
    t = t + np.floor(centre_frac).astype(int)
    frac = (t[:, None, :] + cell.frac_coords[None]).reshape(-1, 3)
    pos = frac @ cell.lattice_angstrom - np.asarray(centre_frac) @ cell.lattice_angstrom
    nums = np.tile(cell.numbers, len(t))
    keep = np.linalg.norm(pos, axis=1) <= radius + 1e-6
    return nums[keep], pos[keep]


def as_sorted(nums: np.ndarray, pos: np.ndarray) -> np.ndarray:
    arr = np.column_stack([nums, np.round(pos, 7)])
    return arr[np.lexsort(arr.T[::-1])]


@pytest.mark.parametrize("family", ["cubic", "tetragonal", "orthorhombic", "hexagonal", "trigonal", "monoclinic"])
@pytest.mark.parametrize("centre", [(0, 0, 0), (0.31, 0.77, 0.05), (2.5, -1.25, 0.5)])
def test_matches_independent_enumeration(zoo: dict, family: str, centre: tuple) -> None:
    cell = zoo[family]
    for radius in (6.0, 9.5):
        res = carve(cell, radius, centre_frac=centre)
        nums, pos = brute_force(cell, radius, np.asarray(centre, float))
        assert res.particle.n_atoms == len(nums) > 0
        got = as_sorted(res.particle.numbers, res.particle.positions_angstrom)
        want = as_sorted(nums, pos)
        assert np.array_equal(got[:, 0], want[:, 0])
        assert np.max(np.abs(got[:, 1:] - want[:, 1:])) < 1e-9


def test_canonical_order_and_determinism(kmgh3: UnitCell) -> None:
    a = carve(kmgh3, 8.0, quaternion=(0.1, 0.2, 0.3, np.sqrt(1 - 0.14)))
    b = carve(kmgh3, 8.0, quaternion=(0.1, 0.2, 0.3, np.sqrt(1 - 0.14)))
    assert a.particle.positions_angstrom.tobytes() == b.particle.positions_angstrom.tobytes()
    assert np.all(np.diff(a.particle.numbers) >= 0)  # species by atomic number first
    base = carve(kmgh3, 8.0).particle
    d = np.linalg.norm(base.positions_angstrom, axis=1)
    for z in np.unique(base.numbers):
        assert np.all(np.diff(np.round(d[base.numbers == z], 6)) >= 0)


def _five_key_order(numbers: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The canonical order's definition, straightforwardly: lexsort of the rounded values."""
    r = np.round(x, 6)
    return np.lexsort((r[:, 2], r[:, 1], r[:, 0], np.round(np.linalg.norm(x, axis=1), 6), numbers))


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 400), kind=st.sampled_from(
    ["lattice", "uniform", "near_ties", "large", "signed_zero"]), scale=st.floats(0.1, 300.0))
def test_canonical_order_equals_five_key_lexsort(seed: int, n: int, kind: str, scale: float) -> None:
    """The packed-key sort (forced here for any size) gives exactly the five-key lexsort's
    permutation: ties in every key, values within 1e-6 Å of each other, ±0, and
    coordinates beyond its 268 Å range (where it falls back)."""
    rng = np.random.default_rng(seed)
    numbers = rng.choice([1, 3, 12, 19, 56, 127], size=n)
    if kind == "lattice":  # shells of equal distance, mirror images: ties everywhere
        x = rng.integers(-4, 5, size=(n, 3)) * (scale / 8.0)
    elif kind == "near_ties":  # values 1e-7 apart that round together or not
        x = rng.integers(-5, 6, size=(n, 3)) * 1.25 + rng.choice(
            [0.0, 1e-7, -1e-7, 4.9e-7, 5.1e-7], size=(n, 3))
    elif kind == "large":
        x = rng.uniform(-1.0, 1.0, size=(n, 3)) * scale * 3.0
    elif kind == "signed_zero":
        x = rng.choice([-0.0, 0.0, 2.5, -2.5, 1e-9, -1e-9], size=(n, 3))
    else:
        x = rng.uniform(-scale, scale, size=(n, 3))
    old = carving._PACK_MIN_ATOMS
    carving._PACK_MIN_ATOMS = 0
    try:
        got = canonical_order(numbers, x)
    finally:
        carving._PACK_MIN_ATOMS = old
    assert np.array_equal(got, _five_key_order(numbers, x))


def test_canonical_order_of_carved_particles(kmgh3: UnitCell) -> None:
    """Carved particles (every shell a tie in species and distance), shuffled, above and
    below the size where the packed sort is used: the five-key sort's permutation."""
    for radius in (6.0, 18.0):
        part = carve(kmgh3, radius, centre_frac=(0.5, 0.5, 0.5)).particle
        perm = np.random.default_rng(0).permutation(part.n_atoms)
        z, x = part.numbers[perm], part.positions_angstrom[perm]
        assert np.array_equal(canonical_order(z, x), _five_key_order(z, x))
        assert np.array_equal(z[canonical_order(z, x)], part.numbers)
    assert part.n_atoms >= carving._PACK_MIN_ATOMS


@pytest.mark.parametrize("chunk", [7, 60, 400])
def test_block_size_changes_nothing(kmgh3: UnitCell, chunk: int) -> None:
    """Blocks of several slabs, of one slab, or of parts of one slab (``_CHUNK_IMAGES``
    tiny) give the same particle bit for bit, margin and clip flag included."""
    want = carve(kmgh3, 9.0, centre_frac=(0.1, 0.2, 0.3), quaternion=(0.1, 0.2, 0.3, np.sqrt(1 - 0.14)))
    old = carving._CHUNK_IMAGES
    carving._CHUNK_IMAGES = chunk
    try:
        got = carve(kmgh3, 9.0, centre_frac=(0.1, 0.2, 0.3), quaternion=(0.1, 0.2, 0.3, np.sqrt(1 - 0.14)))
    finally:
        carving._CHUNK_IMAGES = old
    assert got.particle.numbers.tobytes() == want.particle.numbers.tobytes()
    assert got.particle.positions_angstrom.tobytes() == want.particle.positions_angstrom.tobytes()
    assert got.boundary_margin_angstrom == want.boundary_margin_angstrom
    assert got.paper_supercell_clips == want.paper_supercell_clips


def test_boundary_margin_and_clip_flag(kmgh3: UnitCell) -> None:
    # R = a: six Mg atoms lie exactly on the sphere -> zero margin, included.
    res = carve(kmgh3, 4.02)
    assert res.boundary_margin_angstrom < 1e-9
    assert np.sum(res.particle.numbers == 12) == 7
    assert not res.paper_supercell_clips
    assert carve(kmgh3, 41.0).paper_supercell_clips  # 10 * 4.02 < 41


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_radius(kmgh3: UnitCell, bad: float) -> None:
    with pytest.raises(C2NPInputError, match="radius"):
        carve(kmgh3, bad)


@pytest.mark.parametrize("q", [(0, 0, 0, 2), (np.nan, 0, 0, 1), (0, 0, 1)])
def test_bad_quaternion(q: tuple) -> None:
    with pytest.raises(C2NPInputError, match="quaternion"):
        check_quaternion(q)


def test_quaternion_canonicalised() -> None:
    assert np.allclose(check_quaternion((0, 0, 0, -1)), (0, 0, 0, 1))


radii = st.floats(min_value=2.0, max_value=12.0)


@settings(max_examples=25, deadline=None)
@given(r1=radii, r2=radii)
def test_count_monotone_in_radius(r1: float, r2: float) -> None:
    from helpers import crystal_zoo

    cell = crystal_zoo()["orthorhombic"]
    lo, hi = sorted((r1, r2))
    assert carve(cell, lo).particle.n_atoms <= carve(cell, hi).particle.n_atoms


quats = st.lists(st.floats(-1, 1), min_size=4, max_size=4).filter(lambda v: np.linalg.norm(v) > 0.1)


@settings(max_examples=20, deadline=None)
@given(q=quats, radius=st.floats(4.0, 10.0))
def test_rigid_rotation_of_cell_rotates_particle(q: list, radius: float) -> None:
    from helpers import crystal_zoo

    cell = crystal_zoo()["monoclinic"]
    m = Rotation.from_quat(np.asarray(q) / np.linalg.norm(q)).as_matrix()
    rotated_cell = UnitCell("r", cell.lattice_angstrom @ m.T, cell.numbers, cell.frac_coords)
    a = carve(cell, radius).particle
    b = carve(rotated_cell, radius).particle
    assert a.n_atoms == b.n_atoms
    assert np.abs(as_sorted(a.numbers, a.positions_angstrom @ m.T)
                  - as_sorted(b.numbers, b.positions_angstrom)).max() < 1e-6


@settings(max_examples=20, deadline=None)
@given(q=quats, radius=st.floats(4.0, 10.0))
def test_quaternion_rotates_base_particle(q: list, radius: float) -> None:
    from helpers import perovskite

    quat = np.asarray(q) / np.linalg.norm(q)
    base = carve(perovskite(), radius).particle
    rot = carve(perovskite(), radius, quaternion=quat).particle
    m = Rotation.from_quat(quat).as_matrix()
    assert np.array_equal(base.numbers, rot.numbers)  # same canonical order
    assert np.allclose(base.positions_angstrom @ m.T, rot.positions_angstrom, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(radius=st.floats(3.0, 11.0))
def test_primitive_and_conventional_carve_same_particle(radius: float) -> None:
    from ase.build import bulk

    prim = UnitCell.from_ase(bulk("Cu", "fcc", a=3.61), "Cu")
    conv = UnitCell.from_ase(bulk("Cu", "fcc", a=3.61, cubic=True), "Cu")
    a = carve(prim, radius).particle
    b = carve(conv, radius).particle
    assert a.n_atoms == b.n_atoms
    assert np.abs(a.positions_angstrom - b.positions_angstrom).max() < 1e-9  # canonical order


def test_identity_quaternion_leaves_base_unchanged(kmgh3: UnitCell) -> None:
    a = carve(kmgh3, 7.0).particle
    b = carve(kmgh3, 7.0, quaternion=(0, 0, 0, 1)).particle
    assert a.positions_angstrom.tobytes() == b.positions_angstrom.tobytes()


# --- limits -------------------------------------------------------------------------------
def test_huge_spheres_and_flat_cells_are_refused_before_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    from c2np import limits
    from c2np.errors import C2NPLimitError
    from helpers import perovskite

    monkeypatch.delenv(limits.ENV_VAR, raising=False)
    with pytest.raises(C2NPLimitError, match="R = 1000 Å.*radius_angstrom"):
        carve(perovskite(), 1000)
    flat = UnitCell("flat", [[4, 0, 0], [0, 4, 0], [0, 0, 1e-5]], [1], [[0, 0, 0]])
    with pytest.raises(C2NPLimitError, match="flat at R = 6 Å .estimated atoms.*atoms_per_particle"):
        carve(flat, 6)
    with limits.override(carve_candidates=1000):
        with pytest.raises(C2NPLimitError, match="periodic images to examine"):
            carve(perovskite(), 10)


def test_carving_in_blocks_gives_the_same_particle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory is bounded by examining images in blocks; the result must not depend on it."""
    import c2np.carving as carving
    from helpers import perovskite

    whole = carve(perovskite(), 12, centre_frac=(0.1, 0.2, 0.3))
    monkeypatch.setattr(carving, "_CHUNK_IMAGES", 7)
    blocks = carve(perovskite(), 12, centre_frac=(0.1, 0.2, 0.3))
    assert np.array_equal(whole.particle.numbers, blocks.particle.numbers)
    assert np.array_equal(whole.particle.positions_angstrom, blocks.particle.positions_angstrom)
    assert whole.boundary_margin_angstrom == blocks.boundary_margin_angstrom
