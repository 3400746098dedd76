"""Coverage-guided fuzzing of the c2np readers with atheris (longer runs than the CI suite).

Every input must end in a valid object or a :class:`c2np.errors.C2NPInputError`; any other
exception is a crash that atheris reports with the input that caused it (saved as
``crash-*``). Each crash is a bug: fix it in the module that owns the reader and add the input
as a regression test there (the bounded hypothesis version is tests/test_fuzz_readers.py).

    pip install atheris
    python benchmarks/fuzz_readers.py cif   -atheris_runs=20000 [corpus_dir]
    python benchmarks/fuzz_readers.py xyz   -max_total_time=600
    python benchmarks/fuzz_readers.py store -max_total_time=600

Targets: ``cif`` (read_cif_text), ``xyz`` (the original layout's plain XYZ), ``extxyz`` and
``csv`` and ``h5`` (prediction files, when c2np.predictions is present), ``store``
(DatasetStore.open on a damaged copy of a small store). Prints a summary line at the end.
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
    import c2np.store
    from c2np.errors import C2NPInputError

    try:
        import c2np.predictions  # noqa: F401  (the api layout)
    except ImportError:
        pass

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
_STATS = {"inputs": 0, "accepted": 0, "refused": 0}


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _cif(data: bytes) -> None:
    from c2np.cells import read_cif_text

    cell = read_cif_text(_text(data), source="fuzz.cif")
    assert np.all(np.isfinite(cell.lattice_angstrom)) and cell.n_atoms >= 1


def _xyz(data: bytes) -> None:
    from c2np.formats import read_plain_xyz

    path = _WORK / "p.xyz"
    path.write_bytes(data)
    p = read_plain_xyz(path)
    assert np.all(np.isfinite(p.positions_angstrom))


def _prediction_reader(suffix: str):  # type: ignore[no-untyped-def]
    def run(data: bytes) -> None:
        try:
            from c2np import predictions
        except ImportError:  # before the api layout: nothing to fuzz
            return
        path = _WORK / f"p{suffix}"
        path.write_bytes(data)
        reader = getattr(predictions, "read_predictions", None)
        if reader is not None:
            reader(path)

    return run


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
           "extxyz": (_prediction_reader(".extxyz"), b""), "csv": (_prediction_reader(".csv"), b""),
           "h5": (_prediction_reader(".h5"), b"")}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        raise SystemExit(f"usage: {sys.argv[0]} {{{','.join(TARGETS)}}} [atheris/libFuzzer flags]")
    target, seed = TARGETS[sys.argv.pop(1)]

    def one_input(data: bytes) -> None:
        _STATS["inputs"] += 1
        try:
            target(data)
            _STATS["accepted"] += 1
        except C2NPInputError:
            _STATS["refused"] += 1

    corpus = [a for a in sys.argv[1:] if not a.startswith("-")]
    if not corpus:  # start from the seed so the fuzzer mutates a valid file
        folder = _WORK / "corpus"
        folder.mkdir(exist_ok=True)
        (folder / "seed").write_bytes(seed)
        sys.argv.append(str(folder))
    import atexit

    atexit.register(lambda: print(f"fuzz summary: {_STATS['inputs']} inputs, {_STATS['accepted']} accepted, "
                                  f"{_STATS['refused']} refused with a clear error, 0 crashes "
                                  f"(a crash stops the run with its input)", file=sys.stderr))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
