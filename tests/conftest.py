"""Test fixtures (temp dirs for caches, small crystals); helpers live in ``helpers.py``."""

from __future__ import annotations

import os
import tempfile

import pytest

os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="c2np-mpl-"))
os.environ.setdefault("XDG_CACHE_HOME", tempfile.mkdtemp(prefix="c2np-cache-"))
os.environ.setdefault("NUMBA_CACHE_DIR", tempfile.mkdtemp(prefix="c2np-numba-"))

from c2np.cells import UnitCell  # noqa: E402
from helpers import crystal_zoo, perovskite  # noqa: E402


@pytest.fixture
def kmgh3() -> UnitCell:
    return perovskite()


@pytest.fixture
def zoo() -> dict[str, UnitCell]:
    return crystal_zoo()


@pytest.fixture(scope="module")
def torch_one_thread():
    """Run a module's torch code on one thread (the machine is shared), then restore."""
    torch = pytest.importorskip("torch")
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def dask_executor():  # type: ignore[no-untyped-def]
    """A real 2-worker ``distributed.LocalCluster`` executor for one test module."""
    pytest.importorskip("distributed")
    from c2np.executor import make_executor

    ex = make_executor(scheduler="local:2")
    assert ex.kind == "dask" and ex.workers == 2
    yield ex
    ex.close()
