"""docs/howto/load-data.md: every Python block runs as written (in order, one namespace) on a
small strict store, and every ``c2np`` command of its shell blocks exits 0."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from c2np.cli import build_app
from c2np.store import build_store
from helpers import perovskite

DOC = Path(__file__).resolve().parents[1] / "docs" / "howto" / "load-data.md"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cells = [perovskite(a=4.0 + 0.05 * i, ids=f"M{i}", A=[19, 11, 37, 55, 3][i]) for i in range(5)]
    return build_store(cells, tmp_path_factory.mktemp("howto") / "data.h5", "strict", radii_angstrom=[6, 13, 14],
                       progress=False)


def test_python_blocks_run(store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           torch_one_thread) -> None:
    for module in ("torch", "torch_geometric", "pyarrow", "pandas", "datasets"):
        pytest.importorskip(module)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    (tmp_path / "data.h5").symlink_to(store_path)
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 7
    namespace: dict = {}
    for k, block in enumerate(blocks):
        exec(compile(block, f"docs/howto/load-data.md python block {k}", "exec"), namespace)
    assert namespace["loss"].item() > 0 and namespace["r"]["split"] == "train"
    assert set(namespace["recipes_df"]["split"]) >= {"train", "val", "ood", "heldout"}
    assert (namespace["table"]["model"] == "analytic-carve").all() and len(namespace["table"]) > 0


def test_shell_commands_run(store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyarrow")
    (tmp_path / "data.h5").symlink_to(store_path)
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    commands = [line.split("#")[0].strip() for b in blocks for line in b.splitlines()]
    commands = [c for c in commands if c.startswith("c2np ")]
    assert len(commands) >= 3
    for cmd in commands:
        res = CliRunner().invoke(build_app(), shlex.split(cmd)[1:])
        assert res.exit_code == 0, f"{cmd}: {res.output}"
