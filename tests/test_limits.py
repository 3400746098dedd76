"""Tests of the stated limits (c2np.limits) and the ``--limit`` flag."""

from __future__ import annotations

import os

import pytest

from c2np import limits
from c2np.errors import C2NPInputError, C2NPLimitError


def test_defaults_overrides_and_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(limits.ENV_VAR, raising=False)
    assert limits.current() == limits.Limits()
    assert set(limits.LIMIT_DOCS) == {f for f in limits.Limits.__dataclass_fields__}
    limits.check("bootstrap", 1000, what="--bootstrap")
    with pytest.raises(C2NPLimitError, match=r"--bootstrap: 100,000,000 resamples exceeds the limit "
                                             r"bootstrap = 100,000; raise it with `c2np --limit bootstrap=N"):
        limits.check("bootstrap", 1e8, what="--bootstrap")
    with limits.override(bootstrap=2e8) as now:
        assert now.bootstrap == 200_000_000 and isinstance(now.bootstrap, int)
        limits.check("bootstrap", 1e8, what="--bootstrap")
        assert "bootstrap=" in os.environ[limits.ENV_VAR]  # worker processes inherit it
    assert limits.ENV_VAR not in os.environ
    with pytest.raises(C2NPLimitError):
        limits.check("bootstrap", 1e8, what="--bootstrap")


@pytest.mark.parametrize("text, match", [("nosuch=1", "unknown limit 'nosuch'"), ("bootstrap", "unknown limit"),
                                         ("bootstrap=many", "needs a number"), ("bootstrap=1_000", "needs a number"),
                                         ("bootstrap=-1", ">= 0"), ("bootstrap=inf", "finite"),
                                         ("bootstrap=nan", ">= 0")])
def test_bad_overrides_are_refused(text: str, match: str) -> None:
    with pytest.raises(C2NPInputError, match=match):
        limits.parse_overrides(text)


def test_workers_default_is_twice_the_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(limits.ENV_VAR, raising=False)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert limits.effective("workers") == 2 * cpus
    with pytest.raises(C2NPLimitError, match="workers"):
        limits.check("workers", 500 * cpus, what="--workers")


def test_cli_limit_flag_raises_a_limit(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from c2np.catalog import catalog_data_dir
    from c2np.cli import build_app

    monkeypatch.setenv(limits.ENV_VAR, "")  # restored after the test: --limit writes it
    cif = tmp_path / "KMgH3.cif"
    cif.write_text((catalog_data_dir() / "KMgH3.cif").read_text())
    runner = CliRunner()
    res = runner.invoke(build_app(), ["carve", str(cif), "-r", "1000", "-o", str(tmp_path / "p.extxyz")])
    assert res.exit_code == 2 and "radius_angstrom" in res.output and "--limit" in res.output
    res = runner.invoke(build_app(), ["--limit", "atoms_per_particle=10", "carve", str(cif), "-r", "8",
                                      "-o", str(tmp_path / "p.extxyz")])
    assert res.exit_code == 2 and "atoms_per_particle = 10" in res.output
    res = runner.invoke(build_app(), ["--limit", "radius_angstrom=300", "--limit", "atoms_per_particle=1e8",
                                      "carve", str(cif), "-r", "8", "-o", str(tmp_path / "p.extxyz")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(build_app(), ["--limit", "bogus=1", "info"])
    assert res.exit_code == 2 and "unknown limit 'bogus'" in res.output
