"""The thread policy: cores divided by worker processes, never oversubscribed; overridable by
--threads, C2NP_THREADS and a user-set OMP_NUM_THREADS."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from c2np import threads
from c2np.errors import C2NPInputError
from c2np.executor import LocalExecutor


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in (*threads.THREAD_VARIABLES, threads.ENV_VAR, "_C2NP_THREADS_SET"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    return monkeypatch


def test_cores_are_shared_among_workers(clean_env: pytest.MonkeyPatch) -> None:
    assert threads.threads_per_process(1) == 8
    assert threads.threads_per_process(2) == 4 and threads.threads_per_process(3) == 2
    assert threads.threads_per_process(16) == 1  # never zero, never more than a core each


def test_overrides_and_bad_values(clean_env: pytest.MonkeyPatch) -> None:
    assert threads.threads_per_process(4, threads=3) == 3
    clean_env.setenv("OMP_NUM_THREADS", "2")
    assert threads.threads_per_process(1) == 2  # the user's variable is honoured
    clean_env.setenv(threads.ENV_VAR, "5")
    assert threads.threads_per_process(1) == 5  # ours wins over OMP_NUM_THREADS
    for bad in ("0", "two", "-1"):
        clean_env.setenv(threads.ENV_VAR, bad)
        with pytest.raises(C2NPInputError, match="C2NP_THREADS"):
            threads.threads_per_process(1)


def test_a_value_c2np_set_is_not_taken_for_the_users(clean_env: pytest.MonkeyPatch) -> None:
    threads.set_threads(8)
    assert os.environ["OMP_NUM_THREADS"] == "8"
    assert threads.threads_per_process(4) == 2  # recomputed for 4 workers, not the 8 set before


def _worker_threads(_state: object, _item: int) -> tuple[str, int]:
    import torch

    return os.environ["OMP_NUM_THREADS"], torch.get_num_threads()


def test_pool_workers_get_their_share(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (*threads.THREAD_VARIABLES, threads.ENV_VAR, "_C2NP_THREADS_SET"):
        monkeypatch.delenv(var, raising=False)
    cores = threads.available_cores()
    with LocalExecutor(2) as ex:
        out = [r for part in ex.map(_worker_threads, [0, 1, 2, 3]) for r in part]
    share = max(1, cores // 2)
    assert out == [(str(share), share)] * 4


def test_cli_threads_flag(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from c2np.cli import build_app

    for var in (*threads.THREAD_VARIABLES, threads.ENV_VAR, "_C2NP_THREADS_SET"):
        monkeypatch.delenv(var, raising=False)
    r = CliRunner().invoke(build_app(), ["--threads", "1", "carve", "--help"])
    assert r.exit_code == 0 and os.environ["OMP_NUM_THREADS"] == "1" and os.environ[threads.ENV_VAR] == "1"
    r = CliRunner().invoke(build_app(), ["--version"])
    assert r.exit_code == 0 and r.output.startswith("c2np ")


def test_kernel_cache_check_follows_numba_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The one-line notice of a first compile is printed only when numba's cache lacks the
    scoring kernels."""
    from c2np.evaluation.harness import kernel_cache_is_warm

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert not kernel_cache_is_warm()
    (tmp_path / "x").mkdir()
    for name in ("_auction_kernels.auction-1", "_grid_kernels.bounds-1", "_tree_kernels.kdtree_build-1"):
        (tmp_path / "x" / f"{name}.py311.nbi").write_bytes(b"")
    assert not kernel_cache_is_warm()  # every kernel module is needed
    (tmp_path / "x" / "_pair_kernels.count_bins-16.py311.nbi").write_bytes(b"")
    assert kernel_cache_is_warm()
