"""The metrics, assignment and store code gives the recorded results on fixed rows, bit for
bit (``tools/package_digests.py``): recorded before these modules became packages, so a
move between modules that changed any output fails here. A deliberate change of a result
re-records the digests (``PYTHONPATH=src python tools/package_digests.py``) and says why."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Digests on the platform below (exact: float bytes; rounded: 9 significant digits).
RECORDED_PLATFORM = "x86_64 py3.11 numpy2.4.6 scipy1.17.1"
RECORDED = {
    "assignment": {"exact": "39e7d00dc231bbae736fa111cbea308edc1f6a32d9831791eee3c0816198b8c8",
                   "rounded": "e17d38456933fe49c77648b01508e6b4e3783d0b3e8a2a5ea6bc06b509e9d539"},
    "store": {"exact": "1e9b244429a7efbe11456418df66bb49fc3af84ac608af127f310b0af6810e95",
              "rounded": "21ca356df74532c68e7261363d9467f91124bc246d973eb19db9838dd8100fb6"},
    "forward": {"exact": "53b64b7e27a6000af1b7688cf452327f61d25057f654cbc92608fec64d05c3ee",
                "rounded": "10d5c7fcdb8a01a5491fbc92f724f9d5d226a773d9c109fea99adb6fe22156ff"},
    "inverse": {"exact": "49a5743d9ebc8441190b4cee47f9557d57cb166ad0897cc77798995921eaf951",
                "rounded": "9b6d627138ebeb968469fd7cf4fe237370af592a594dda622643ef585fd861d7"},
}


def _tool():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import package_digests
    finally:
        sys.path.pop(0)
    return package_digests


@pytest.fixture(scope="module")
def computed() -> tuple[str, dict[str, dict[str, str]]]:
    tool = _tool()
    return tool.platform_key(), tool.digests()


@pytest.mark.parametrize("section", sorted(RECORDED))
def test_outputs_equal_the_recorded_digests(computed: tuple[str, dict[str, dict[str, str]]],
                                            section: str) -> None:
    key, got = computed
    kind = "exact" if key == RECORDED_PLATFORM else "rounded"
    assert got[section][kind] == RECORDED[section][kind], \
        f"{section}: outputs differ from the recorded ones ({kind} digest on {key})"


def test_a_changed_output_changes_the_digest() -> None:
    tool = _tool()
    a, b = tool._Digest(), tool._Digest()
    a.add([1.0, "x"])
    b.add([1.0 + 2.0 ** -52, "x"])
    assert a.exact.hexdigest() != b.exact.hexdigest()
    assert a.rounded.hexdigest() == b.rounded.hexdigest()
