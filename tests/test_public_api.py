"""The curated public namespace: every name resolves to the module that owns it, lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import c2np


def test_every_public_name_resolves_to_its_home_module() -> None:
    for name, module in c2np._EXPORTS.items():
        obj = getattr(c2np, name)
        assert getattr(obj, "__module__", module).startswith("c2np"), name
    assert set(c2np.__all__) == {"__version__", *c2np._EXPORTS}


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        c2np.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_import_is_light_and_package_is_typed() -> None:
    code = "import sys, c2np; print(sorted(m for m in ('numpy', 'scipy', 'torch', 'h5py') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(c2np.__file__).parent.parent)})
    assert out.stdout.strip() == "[]"
    assert (Path(c2np.__file__).parent / "py.typed").is_file()
