"""Hostile inputs against the ``c2np`` command line: the table of docs/reliability.md.

Each case builds a bad input (crafted store, special output path, huge value, tiny file
declaring huge arrays, ...), runs ``python -m c2np ...`` in a fresh process with a time
limit, and records the exit code, whether a Python traceback appeared, the wall time and
the first line of the message. Cases that need root (tmpfs mounts) are skipped otherwise.

    python tools/hostile_inputs.py [--work DIR] [--timeout 120] > table.md

Prints a Markdown table; exits 1 when any case shows a traceback, times out or gets an exit
code other than the expected one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

KMGH3_CIF = """data_KMgH3
_cell_length_a {a}
_cell_length_b 4.02
_cell_length_c {c}
_cell_angle_alpha {al}
_cell_angle_beta {be}
_cell_angle_gamma {ga}
_symmetry_space_group_name_H-M 'P 1'
loop_
_atom_site_label
_atom_site_type_symbol
_atom_site_fract_x
_atom_site_fract_y
_atom_site_fract_z
K1 K 0.5 0.5 0.5
Mg1 Mg 0 0 0
H1 H 0.5 0 0
H2 H 0 0.5 0
H3 H 0 0 0.5
{extra}"""


def cif(a: str = "4.02", c: str = "4.02", al: str = "90", be: str = "90", ga: str = "90", extra: str = "") -> str:
    return KMGH3_CIF.format(a=a, c=c, al=al, be=be, ga=ga, extra=extra)


@dataclass
class Case:
    name: str
    expected: int
    prepare: Callable[[Path], list[str]]  # returns the c2np arguments
    needs_root: bool = False
    max_address_bytes: int | None = None  # run the case under this address-space limit


def _store(work: Path) -> Path:
    path = work / "good.h5"
    if not path.exists():
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from helpers import two_perovskite_store

        two_perovskite_store(path)
    return path


def _copy_store(work: Path, name: str) -> Path:
    import shutil

    dst = work / name
    shutil.copy(_store(work), dst)
    return dst


def _rename_material(path: Path, new: str) -> None:
    import h5py

    with h5py.File(path, "r+") as f:
        ids = [s.decode() for s in f["cells/material_ids"][()]]
        old, ids[0] = ids[0], new
        del f["cells/material_ids"]
        f["cells"].create_dataset("material_ids", data=np.array([i.encode() for i in ids], dtype="S"))
        f["recipes"].attrs["materials"] = json.dumps([new if m == old else m for m in
                                                      json.loads(f["recipes"].attrs["materials"])])


def _tamper(path: Path, name: str, fn: Callable) -> Path:  # type: ignore[type-arg]
    import h5py

    with h5py.File(path, "r+") as f:
        fn(f[name])
    return path


def _write_cif(work: Path, name: str, text: str) -> Path:
    p = work / name
    p.write_text(text, encoding="utf-8")
    return p


def _good_cif(work: Path) -> Path:
    return _write_cif(work, "KMgH3.cif", cif())


def _perfect_preds(work: Path, fmt: str = "extxyz") -> Path:
    from c2np.baselines import analytic_carve, predict
    from c2np.predictions import write_forward_predictions
    from c2np.store import DatasetStore
    from c2np.tasks import ForwardTask

    preds = predict(ForwardTask(DatasetStore.open(_store(work)), "id"), analytic_carve)
    return write_forward_predictions(work / "perfect.extxyz", preds)


def _ev(work: Path, preds: Path, task: str = "forward", *extra: str, store: Path | None = None) -> list[str]:
    return ["evaluate", "--store", str(store or _store(work)), "--task", task, "--split", "id",
            "--predictions", str(preds), "-o", str(work / "results" / f"{preds.stem}.json"), *extra]


def _forward_preds_with(work: Path, name: str, change: Callable, fmt: str = "h5") -> Path:  # type: ignore[type-arg]
    from c2np.baselines import analytic_carve, predict
    from c2np.particle import Particle
    from c2np.predictions import write_forward_predictions, write_forward_predictions_h5
    from c2np.store import DatasetStore
    from c2np.tasks import ForwardTask

    preds = predict(ForwardTask(DatasetStore.open(_store(work)), "id"), analytic_carve)
    first = next(iter(preds))
    preds[first] = change(preds[first], Particle)
    if fmt == "extxyz":  # float64 text: 1e155 stays finite (float32 HDF5 would make it inf)
        return write_forward_predictions(work / f"{name}.extxyz", preds)
    return write_forward_predictions_h5(work / f"{name}.h5", preds)


def _inverse_csv(work: Path, name: str, row: str) -> Path:
    from c2np.store import DatasetStore
    from c2np.tasks import InverseTask

    ids = [q.sample_id for q in InverseTask(DatasetStore.open(_store(work)), "id").queries()]
    lines = ["sample_id,a,b,c,alpha,beta,gamma,spacegroup", f"{ids[0]},{row}"]
    lines += [f"{s},4.02,4.02,4.02,90,90,90,221" for s in ids[1:]]
    p = work / f"{name}.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def _mount(folder: Path, options: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    return os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                                                capture_output=True).returncode == 0


def _raw_archive(work: Path, name: str, lines: list[str]) -> Path:
    root = work / name
    (root / "cifs").mkdir(parents=True, exist_ok=True)
    (root / "cifs" / "KMgH3.cif").write_text(cif())
    (root / "materials").mkdir(exist_ok=True)
    (root / "materials" / "KMgH3_R6.xyz").write_text("\n".join(lines) + "\n")
    return root


def _noisy_particle(work: Path, sigma: float = 0.3) -> Path:
    """KMgH3 carved at R = 8 Å about a random centre and rotation (seed 45) with Gaussian noise
    of ``sigma`` Å on every coordinate: before the symmetry search was bounded, moyopy asked for
    1.8 GB and more on this one (tests/data/moyo_runaway_cell.json is its reconstructed cell)."""
    from scipy.spatial.transform import Rotation

    from c2np.carving import carve
    from c2np.catalog.textbook import prototype_cell
    from c2np.particle import Particle
    from c2np.particle_io import write_extxyz

    rng = np.random.default_rng(45)
    part = carve(prototype_cell("KMgH3-cubic"), 8.0, centre_frac=rng.random(3),
                 quaternion=Rotation.random(random_state=rng).as_quat()).particle
    pos = part.positions_angstrom + rng.normal(scale=0.3, size=part.positions_angstrom.shape) * (sigma / 0.3)
    return write_extxyz(work / f"noisy{sigma:g}.extxyz", [(Particle(part.numbers, pos), {})])


def cases() -> list[Case]:
    out: list[Case] = []

    def add(name: str, expected: int, needs_root: bool = False,  # type: ignore[no-untyped-def]
            max_address_bytes: int | None = None):
        def deco(fn: Callable[[Path], list[str]]) -> Callable[[Path], list[str]]:
            out.append(Case(name, expected, fn, needs_root, max_address_bytes))
            return fn
        return deco

    @add("store whose material id is `../../x`: export --format original", 2)
    def _(w: Path) -> list[str]:
        p = _copy_store(w, "evil.h5")
        _rename_material(p, "../../x")
        return ["export", str(p), "--format", "original", "-o", str(w / "exp")]

    @add("store whose material id is an absolute path: verify", 2)
    def _(w: Path) -> list[str]:
        p = _copy_store(w, "abs.h5")
        _rename_material(p, "/tmp/abs")
        return ["verify", str(p)]

    @add("`-o` is a FIFO", 2)
    def _(w: Path) -> list[str]:
        fifo = w / "fifo"
        if not fifo.exists():
            os.mkfifo(fifo)
        return ["carve", str(_good_cif(w)), "-r", "6", "-o", str(fifo)]

    @add("`-o` is a device (/dev/null)", 2)
    def _(w: Path) -> list[str]:
        return ["carve", str(_good_cif(w)), "-r", "6", "-o", "/dev/null"]

    @add("`-o` is a symlink to another file", 2)
    def _(w: Path) -> list[str]:
        (w / "victim.txt").write_text("keep")
        link = w / "link.extxyz"
        if not link.is_symlink():
            link.symlink_to(w / "victim.txt")
        return ["carve", str(_good_cif(w)), "-r", "6", "-o", str(link)]

    @add("`-o` is a directory", 2)
    def _(w: Path) -> list[str]:
        (w / "adir").mkdir(exist_ok=True)
        return ["carve", str(_good_cif(w)), "-r", "6", "-o", str(w / "adir")]

    @add("`-o` under a file", 2)
    def _(w: Path) -> list[str]:
        (w / "afile").write_text("x")
        return ["carve", str(_good_cif(w)), "-r", "6", "-o", str(w / "afile" / "p.extxyz")]

    @add("read-only output folder (tmpfs, ro)", 2, needs_root=True)
    def _(w: Path) -> list[str]:
        ro = w / "ro"
        if not _mount(ro, "size=64k,ro"):
            raise RuntimeError("skip")
        return ["carve", str(_good_cif(w)), "-r", "6", "-o", str(ro / "p.extxyz")]

    @add("full disk (256 kB tmpfs), carve -r 60", 2, needs_root=True)
    def _(w: Path) -> list[str]:
        small = w / "small"
        if not _mount(small, "size=256k"):
            raise RuntimeError("skip")
        return ["carve", str(_good_cif(w)), "-r", "60", "-o", str(small / "p.extxyz")]

    @add("nearly flat cell (c = 1e-5 Å): carve -r 6", 2)
    def _(w: Path) -> list[str]:
        return ["carve", str(_write_cif(w, "Flat.cif", cif(c="0.00001").replace("H3 H 0 0 0.5\n", ""))),
                "-r", "6", "-o", str(w / "flat.extxyz")]

    @add("carve -r 1000", 2)
    def _(w: Path) -> list[str]:
        return ["carve", str(_good_cif(w)), "-r", "1000", "-o", str(w / "big.extxyz")]

    @add("9 kB HDF5 predictions declaring 300 million atoms", 2)
    def _(w: Path) -> list[str]:
        import h5py

        from c2np.predictions import FORWARD_H5_FORMAT

        p = w / "decl.h5"
        with h5py.File(p, "w") as f:
            f.attrs["format"] = FORWARD_H5_FORMAT
            f.create_dataset("sample_ids", data=np.array([b"KMgH3/R6/rot_1"]))
            f.create_dataset("offsets", data=np.array([0, 300_000_000]))
            f.create_dataset("numbers", shape=(300_000_000,), dtype="i2", chunks=(1 << 16,), compression="gzip")
            f.create_dataset("positions", shape=(300_000_000, 3), dtype="f4", chunks=(1 << 16, 3),
                             compression="gzip")
        return _ev(w, p)

    @add("store declaring a huge array (nothing stored)", 2)
    def _(w: Path) -> list[str]:
        import h5py

        p = _copy_store(w, "huge.h5")
        with h5py.File(p, "r+") as f:
            del f["base/positions"]
            f["base"].create_dataset("positions", shape=(300_000_000, 3), dtype="f4", chunks=(1 << 16, 3),
                                     compression="gzip")
        return ["info", str(p)]

    @add("zip member of 200 MB of zeros", 2)
    def _(w: Path) -> list[str]:
        z = w / "bomb.zip"
        if not z.exists():
            with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                with zf.open("Zeros.cif", "w", force_zip64=True) as fh:
                    block = b"\0" * (1 << 20)
                    for _ in range(200):
                        fh.write(block)
        return ["build", "--cifs", str(z), "--radii", "6", "-o", str(w / "bomb_store.h5")]

    @add("evaluate --bootstrap 100000000", 2)
    def _(w: Path) -> list[str]:
        return _ev(w, _perfect_preds(w), "forward", "--bootstrap", "100000000")

    @add("build --radii 6-100000000", 2)
    def _(w: Path) -> list[str]:
        return ["build", "--cifs", str(_good_cif(w)), "--radii", "6-100000000", "-o", str(w / "r.h5")]

    @add("evaluate --workers 500", 2)
    def _(w: Path) -> list[str]:
        return _ev(w, _perfect_preds(w), "forward", "--workers", "500")

    @add("prediction of 1,000,000 atoms in an R = 6 Å ball (one sample)", 0)
    def _(w: Path) -> list[str]:
        rng = np.random.default_rng(0)
        return _ev(w, _forward_preds_with(w, "million", lambda p, P: P(np.ones(1_000_000, dtype=int),
                                                                        rng.uniform(-6, 6, (1_000_000, 3)))))

    @add("identify on a dense gas of 1,000,000 atoms", 2)
    def _(w: Path) -> list[str]:
        from c2np.particle import Particle
        from c2np.particle_io import write_extxyz

        rng = np.random.default_rng(0)
        p = write_extxyz(w / "gas.extxyz", [(Particle(np.ones(1_000_000, dtype=int),
                                                      rng.uniform(-20, 20, (1_000_000, 3))), {})])
        return ["identify", str(p)]

    @add("identify a very noisy particle (KMgH3 R = 8 Å, σ = 0.3 Å on every coordinate; 3 GB cap)", 1,
         max_address_bytes=3 << 30)
    def _(w: Path) -> list[str]:
        return ["identify", str(_noisy_particle(w))]

    @add("identify with `--limit solver_sites=2` (sites counted before the symmetry search)", 2,
         max_address_bytes=3 << 30)
    def _(w: Path) -> list[str]:
        return ["--limit", "solver_sites=2", "identify", str(_noisy_particle(w, sigma=0.0))]

    @add("identify an XYZ file of one 2 MB line", 2)
    def _(w: Path) -> list[str]:
        p = w / "oneline.xyz"
        p.write_text("1" * (2 << 20))
        return ["identify", str(p)]

    @add("task-2 CSV larger than `--limit text_bytes=100`", 2)
    def _(w: Path) -> list[str]:
        return ["--limit", "text_bytes=100", *_ev(w, _inverse_csv(w, "big", "4.02,4.02,4.02,90,90,90,221"),
                                                   "inverse")]

    @add("CIF with 10,648 atoms (P1): carve -r 6", 0)
    def _(w: Path) -> list[str]:
        n = 22
        g = np.stack(np.meshgrid(*[np.arange(n) / n] * 3, indexing="ij"), -1).reshape(-1, 3)
        sites = "".join(f"H{i} H {x:.6f} {y:.6f} {z:.6f}\n" for i, (x, y, z) in enumerate(g))
        text = cif(a="39.6", c="39.6").replace("4.02", "39.6").split("loop_")[0] + (
            "loop_\n_atom_site_label\n_atom_site_type_symbol\n_atom_site_fract_x\n_atom_site_fract_y\n"
            "_atom_site_fract_z\n" + sites)
        return ["carve", str(_write_cif(w, "Big.cif", text)), "-r", "6", "-o", str(w / "bigcif.extxyz")]

    @add("prediction with a 1e155 Å coordinate (one sample)", 0)
    def _(w: Path) -> list[str]:
        return _ev(w, _forward_preds_with(w, "e155", lambda p, P: P(p.numbers, p.positions_angstrom + 1e155),
                                          fmt="extxyz"))

    @add("task-2 prediction with a = 1e308 Å (one sample)", 0)
    def _(w: Path) -> list[str]:
        return _ev(w, _inverse_csv(w, "e308", "1e308,4.02,4.02,90,90,90,221"), "inverse")

    @add("task-2 prediction with angles 170°, 170°, 170° (one sample)", 0)
    def _(w: Path) -> list[str]:
        return _ev(w, _inverse_csv(w, "a170", "4.02,4.02,4.02,170,170,170,221"), "inverse")

    @add("task-2 space group `4_1`", 2)
    def _(w: Path) -> list[str]:
        return _ev(w, _inverse_csv(w, "sg41", "4.02,4.02,4.02,90,90,90,4_1"), "inverse")

    @add("task-2 CSV with an unterminated quote", 2)
    def _(w: Path) -> list[str]:
        p = _inverse_csv(w, "quote", "4.02,4.02,4.02,90,90,90,221")
        lines = p.read_text().splitlines()
        lines[2] = '"' + lines[2]
        p.write_text("\n".join(lines) + "\n")
        return _ev(w, p, "inverse")

    @add("tampered store (one position moved 3e-5 Å): evaluate", 2)
    def _(w: Path) -> list[str]:
        p = _tamper(_copy_store(w, "shift.h5"), "base/positions", lambda d: d.__setitem__((2, 1), d[2, 1] + 3e-5))
        return _ev(w, _perfect_preds(w), "forward", store=p)

    @add("tampered store (one position moved 3e-5 Å): verify", 1)
    def _(w: Path) -> list[str]:
        p = _tamper(_copy_store(w, "shift2.h5"), "base/positions", lambda d: d.__setitem__((2, 1), d[2, 1] + 3e-5))
        return ["verify", str(p)]

    @add("tampered store (boundary margin changed): verify", 1)
    def _(w: Path) -> list[str]:
        p = _tamper(_copy_store(w, "margin.h5"), "base/boundary_margin", lambda d: d.__setitem__(0, d[0] + 1e-3))
        return ["verify", str(p)]

    @add("tampered store (clip flag flipped): verify", 1)
    def _(w: Path) -> list[str]:
        p = _tamper(_copy_store(w, "clip.h5"), "base/paper_supercell_clips", lambda d: d.__setitem__(0, not d[0]))
        return ["verify", str(p)]

    @add("path with `[bold]` and `:x:` (missing file)", 2)
    def _(w: Path) -> list[str]:
        return ["carve", str(w / "[bold]a:x:.cif"), "-r", "6", "-o", str(w / "m.extxyz")]

    @add("non-ASCII CIF name in a folder: build", 2)
    def _(w: Path) -> list[str]:
        d = w / "nonascii"
        d.mkdir(exist_ok=True)
        (d / "KMgH₃.cif").write_text(cif())
        return ["build", "--cifs", str(d), "--radii", "6", "-o", str(w / "na.h5")]

    @add("identify a flat particle (no 3D lattice)", 1)
    def _(w: Path) -> list[str]:
        p = w / "flat.xyz"
        p.write_text("25\n\n" + "".join(f"K {i * 4.0} {j * 4.0} 0\n" for i in range(5) for j in range(5)))
        return ["identify", str(p)]

    @add("identify a particle scaled by 1e8", 2)
    def _(w: Path) -> list[str]:
        from c2np.carving import carve
        from c2np.cells import read_cif
        from c2np.particle import Particle
        from c2np.particle_io import write_extxyz

        part = carve(read_cif(_good_cif(w)), 8).particle
        return ["identify", str(write_extxyz(w / "scaled.extxyz",
                                             [(Particle(part.numbers, part.positions_angstrom * 1e8), {})]))]

    @add("benchmark --tasks bogus", 2)
    def _(w: Path) -> list[str]:
        return ["benchmark", "--store", str(_store(w)), "--tasks", "bogus", "-o", str(w / "bench")]

    @add("CIF with a negative length", 2)
    def _(w: Path) -> list[str]:
        return ["carve", str(_write_cif(w, "Neg.cif", cif(a="-4.02"))), "-r", "6", "-o", str(w / "n.extxyz")]

    @add("CIF with overlapping atoms", 2)
    def _(w: Path) -> list[str]:
        return ["carve", str(_write_cif(w, "Ovl.cif", cif(extra="K2 K 0.501 0.5 0.5\n"))), "-r", "6",
                "-o", str(w / "o.extxyz")]

    @add("`.CIF` (upper case) in a folder: build", 0)
    def _(w: Path) -> list[str]:
        d = w / "upper"
        d.mkdir(exist_ok=True)
        (d / "KMgH3.CIF").write_text(cif())
        return ["build", "--cifs", str(d), "--radii", "6", "-o", str(w / "upper.h5")]

    @add("import-original: an `X` atom", 2)
    def _(w: Path) -> list[str]:
        return ["import-original", str(_raw_archive(w, "rawX", ["1", "", "X 0 0 0"])), "-o", str(w / "x.h5")]

    @add("import-original: a zero-atom particle", 2)
    def _(w: Path) -> list[str]:
        return ["import-original", str(_raw_archive(w, "raw0", ["0", ""])), "-o", str(w / "z.h5")]

    @add("import-original: a 1e30 Å coordinate", 2)
    def _(w: Path) -> list[str]:
        return ["import-original", str(_raw_archive(w, "raw30", ["2", "", "K 0 0 0", "Mg 1e30 0 0"])),
                "-o", str(w / "e30.h5")]

    @add("import-original: overlapping atoms", 2)
    def _(w: Path) -> list[str]:
        return ["import-original", str(_raw_archive(w, "rawo", ["2", "", "K 0 0 0", "Mg 0 0 0.1"])),
                "-o", str(w / "ov.h5")]

    @add("predict with a damaged run folder (bad safetensors)", 2)
    def _(w: Path) -> list[str]:
        from c2np.models.config import get_config
        from c2np.models.training import train
        from c2np.store import DatasetStore
        from helpers import two_perovskite_store

        run = w / "run"
        store = w / "train.h5"
        if not store.exists():
            two_perovskite_store(store, radii_angstrom=(6, 8))  # R = 8 is a train radius
        if not run.exists():
            tiny = get_config("tiny")
            cfg = tiny.__class__(**{**tiny.to_dict(), "steps_per_epoch": 2, "n_val": 2, "epochs": 1})
            train(DatasetStore.open(store), "sitescore", "inverse", cfg, run, progress=False)
        for folder in ("checkpoint", "best"):  # predict reads the best checkpoint by default
            (run / folder / "model.safetensors").write_bytes(b"\0" * 64)
        return ["predict", "--run", str(run), "--store", str(store), "--split", "ood", "-o", str(w / "p.csv")]

    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="Work folder (default: a new temp folder).")
    ap.add_argument("--timeout", type=float, default=120.0, help="Seconds per case.")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="c2np-hostile-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    print("| input | command | exit (expected) | traceback | seconds | message (first line) |")
    print("|---|---|---:|:---:|---:|---|")
    bad = 0
    try:
        bad = _run_all(work, env, args.timeout)
    finally:
        for mnt in ("ro", "small"):
            subprocess.run(["umount", str(work / mnt)], capture_output=True)
    print(f"\n{bad} unexpected outcome(s) in work folder {work}", file=sys.stderr)
    return 1 if bad else 0


def _run_all(work: Path, env: dict[str, str], timeout: float) -> int:
    bad = 0
    for case in cases():
        try:
            argv = case.prepare(work)
        except RuntimeError as exc:
            if str(exc) != "skip":
                raise
            print(f"| {case.name} | - | skipped (needs root for a tmpfs) | | | |")
            continue
        t0 = time.perf_counter()
        cap = case.max_address_bytes

        def _limit(cap: int | None = cap) -> None:
            if cap is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

        try:
            res = subprocess.run([sys.executable, "-m", "c2np", *argv], capture_output=True, text=True,
                                 timeout=timeout, env=env, cwd=work, preexec_fn=_limit)  # noqa: PLW1509
            code, text = res.returncode, res.stderr + res.stdout
        except subprocess.TimeoutExpired:
            code, text = -1, "TIMEOUT"
        dt = time.perf_counter() - t0
        tb = "Traceback" in text
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "/s]" not in ln]
        msg = next((ln for ln in lines if ln.startswith("error:")), lines[-1] if lines else "")
        while argv and argv[0] == "--limit":  # root options come first
            argv = argv[2:]
        if code == 0 and argv[0] == "evaluate":  # the outcome is in the results: the failed sample
            doc = json.loads(Path(argv[argv.index("-o") + 1]).read_text())
            reasons = [f["reason"] for f in doc["failed_samples"]]
            msg = f"{doc['n_samples']} scored, {doc['n_failed']} failed" + (f": {reasons[0]}" if reasons else "")
        msg = msg.replace(str(work), "WORK").replace("|", "\\|")[:150]
        ok = code == case.expected and not tb
        bad += not ok
        cmd = argv[0]
        print(f"| {case.name} | `{cmd}` | {code} ({case.expected}){'' if ok else ' **!**'} | "
              f"{'yes' if tb else 'no'} | {dt:.1f} | {msg} |", flush=True)
    return bad


if __name__ == "__main__":
    raise SystemExit(main())
