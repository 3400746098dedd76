"""Coverage-guided fuzzing of the c2np readers with atheris (longer runs than the CI suite).

Every input must end in a valid object or a :class:`c2np.errors.C2NPInputError`; any other
exception is a crash that atheris reports with the input that caused it (saved as
``crash-*``). Each crash is a bug: fix it in the module that owns the reader and add the input
as a regression test there (the bounded hypothesis version is tests/test_fuzz_readers.py).

    pip install atheris
    python tools/fuzz_readers.py cif   -atheris_runs=20000 [corpus_dir]
    python tools/fuzz_readers.py xyz   -max_total_time=600
    python tools/fuzz_readers.py store -max_total_time=600

Targets: ``cif`` (read_cif_text), ``xyz`` (read_particle: the one XYZ parser), ``extxyz`` and
``csv`` and ``h5`` (prediction files, :mod:`c2np.predictions`), ``store``
(DatasetStore.open on a damaged copy of a small store). libFuzzer prints ``Done N runs``
at the end; a crash stops the run and names its ``crash-*`` file.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["c2np"]):
    import numpy as np

    import c2np.cells
    import c2np.formats
    import c2np.particle_io  # noqa: F401  (imported here so atheris instruments them)
    import c2np.predictions  # noqa: F401
    from c2np.errors import C2NPInputError

SEED_CIF = b"""data_KMgH3
_cell_length_a 4.02
_cell_length_b 4.02
_cell_length_c 4.02
_cell_angle_alpha 90
_cell_angle_beta 90
_cell_angle_gamma 90
_symmetry_space_group_name_H-M 'P m -3 m'
loop_
_atom_site_label
_atom_site_type_symbol
_atom_site_fract_x
_atom_site_fract_y
_atom_site_fract_z
K1 K 0.5 0.5 0.5
Mg1 Mg 0 0 0
H1 H 0.5 0 0
"""
SEED_XYZ = b"3\ncomment\nK 0 0 0\nMg 2.01 0 0\nH 0 2.01 0\n"

_WORK = Path(tempfile.mkdtemp(prefix="c2np-fuzz-"))


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _cif(data: bytes) -> None:
    from c2np.cells import read_cif_text

    cell = read_cif_text(_text(data), source="fuzz.cif")
    assert np.all(np.isfinite(cell.lattice_angstrom)) and cell.n_atoms >= 1


def _xyz(data: bytes) -> None:
    from c2np.particle_io import read_particle

    path = _WORK / "p.xyz"
    path.write_bytes(data)
    p = read_particle(path)
    assert np.all(np.isfinite(p.positions_angstrom))


def _prediction_reader(suffix: str):  # type: ignore[no-untyped-def]
    def run(data: bytes) -> None:
        from c2np.predictions import iter_forward_predictions, read_inverse_predictions

        path = _WORK / f"p{suffix}"
        path.write_bytes(data)
        if suffix == ".csv":
            for row in read_inverse_predictions(path).values():
                assert row.params.shape == (6,)
        else:
            for _place, _sid, numbers, pos in iter_forward_predictions(path):
                assert pos.shape == (len(numbers), 3)

    return run


SEED_EXTXYZ = (b'2\nProperties=species:S:1:pos:R:3 sample_id=KMgH3/R6/rot_0 pbc="F F F"\nK 0 0 0\nH 1 1 1\n'
               b"1\nProperties=species:S:1:pos:R:3 sample_id=KMgH3/R6/rot_1\nMg 0.5 0.5 0.5\n")
SEED_CSV = b"sample_id,a,b,c,alpha,beta,gamma,spacegroup\ns1,4.02,4.02,4.02,90,90,90,221\n"


_STORE_BYTES: bytes | None = None


def _store(data: bytes) -> None:
    """Overwrite a slice of a genuine small store with the fuzz bytes, then open it."""
    global _STORE_BYTES
    from c2np.store import DatasetStore, build_store

    if _STORE_BYTES is None:
        from c2np.cells import UnitCell

        cell = UnitCell("KMgH3", np.eye(3) * 4.02, [19, 12, 1, 1, 1],
                        [[0.5, 0.5, 0.5], [0, 0, 0], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]])
        _STORE_BYTES = build_store([cell], _WORK / "good.h5", radii_angstrom=[6], progress=False).read_bytes()
    raw = bytearray(_STORE_BYTES)
    if len(data) >= 4:
        at = int.from_bytes(data[:4], "little") % len(raw)
        patch = data[4:]
        raw[at:at + len(patch)] = patch
    path = _WORK / "fuzz.h5"
    path.write_bytes(bytes(raw))
    store = DatasetStore.open(path)
    if len(store):
        store.particle(0)


TARGETS = {"cif": (_cif, SEED_CIF), "xyz": (_xyz, SEED_XYZ), "store": (_store, b"\0\0\0\0"),
           "extxyz": (_prediction_reader(".extxyz"), SEED_EXTXYZ), "csv": (_prediction_reader(".csv"), SEED_CSV),
           "h5": (_prediction_reader(".h5"), b"\x89HDF\r\n\x1a\n")}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        raise SystemExit(f"usage: {sys.argv[0]} {{{','.join(TARGETS)}}} [atheris/libFuzzer flags]")
    target, seed = TARGETS[sys.argv.pop(1)]

    def one_input(data: bytes) -> None:
        try:
            target(data)
        except C2NPInputError:
            pass  # a clear error: the wanted outcome for a bad file

    corpus = [a for a in sys.argv[1:] if not a.startswith("-")]
    if not corpus:  # start from the seed so the fuzzer mutates a valid file
        folder = _WORK / "corpus"
        folder.mkdir(exist_ok=True)
        (folder / "seed").write_bytes(seed)
        sys.argv.append(str(folder))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
