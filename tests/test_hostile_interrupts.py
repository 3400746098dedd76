"""Ctrl-C during a parallel command: every worker ends within seconds, one line is printed,
the exit code is 130 and the outputs are as they were."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from c2np.cells import write_cif
from helpers import perovskite, two_perovskite_store

SRC = Path(__file__).resolve().parents[1] / "src"

# the work a worker does is made slow (fork: the workers inherit the patch), and each worker
# says when it has started, so that Ctrl-C lands in the middle of the pool
_RUN = """
import sys, time
sys.path.insert(0, {src!r})
import {module} as target
original = target.{func}
def slow(*args, **kwargs):
    print("WORKING", flush=True)
    time.sleep(120)
    return original(*args, **kwargs)
target.{func} = slow
sys.argv = ["c2np", *{argv!r}]
from c2np.cli import main
main()
"""


def _own_group_with_default_sigint() -> None:
    """In the child before exec: a process group of its own (``setsid``, so that ``killpg``
    reaches it and its workers, as a terminal's Ctrl-C reaches the foreground group) and
    SIGINT at its default."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(module: str, func: str, argv: list[str]) -> tuple[int, str, float]:
    script = textwrap.dedent(_RUN).format(src=str(SRC), module=module, func=func, argv=argv)
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    # Ctrl-C as a terminal delivers it: the command starts with SIGINT at its default (a test
    # runner started in the background of a non-interactive shell has SIGINT ignored, and an
    # ignored signal stays ignored across exec)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, preexec_fn=_own_group_with_default_sigint)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "WORKING", proc.stderr.read() if proc.stderr else ""
        time.sleep(0.5)
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        _, err = proc.communicate(timeout=30)
        seconds = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # no worker of the group is left
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("a worker outlived the interrupted command")
    return proc.returncode, err, seconds


def _error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.strip() and "\r" not in ln and "it/s" not in ln and "%|" not in ln]


def test_ctrl_c_during_build_with_workers(tmp_path: Path) -> None:
    cifs = tmp_path / "cifs"
    write_cif(perovskite(), cifs / "KMgH3.cif")
    write_cif(perovskite(a=3.9, ids="NaMgH3", A=11), cifs / "NaMgH3.cif")
    out = tmp_path / "s.h5"
    code, err, seconds = _interrupt("c2np.store.write", "_carve_pair",
                                    ["build", "--cifs", str(cifs), "--radii", "6,7", "-o", str(out), "--workers", "2",
                                     "--json"])
    assert code == 130, err
    assert seconds < 15
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert _error_lines(err) == ["error: interrupted"], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cifs"]  # nothing written, no temp file left


@pytest.mark.slow  # the scoring kernels load (or compile) in the child first
def test_ctrl_c_during_evaluate_with_workers(tmp_path: Path) -> None:
    from c2np.carving import carve
    from c2np.predictions import write_forward_predictions
    from c2np.tasks import ForwardTask

    path = two_perovskite_store(tmp_path / "t.h5")
    ids = [q.sample_id for q in ForwardTask.open(path, "id").queries()][:4]
    preds = write_forward_predictions(tmp_path / "p.extxyz", {i: carve(perovskite(), 6).particle for i in ids})
    results = tmp_path / "r.json"
    results.write_text("old results\n")
    code, err, seconds = _interrupt("c2np.evaluation.harness", "_score_item",
                                    ["evaluate", "--store", str(path), "--task", "forward", "--split", "id",
                                     "--predictions", str(preds), "-o", str(results), "--workers", "2"])
    assert code == 130, err
    assert seconds < 15
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert [ln for ln in _error_lines(err) if ln.startswith("error")] == ["error: interrupted"], err
    assert results.read_text() == "old results\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
