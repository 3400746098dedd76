"""Tests of the safe-name rule (c2np.names)."""

from __future__ import annotations

import pytest

from c2np.errors import C2NPInputError
from c2np.names import MAX_NAME_LENGTH, check_distinct_names, check_safe_name, is_safe_name


@pytest.mark.parametrize("name", ["KMgH3", "Al2O3-corundum", "a.b_c+d", "7", "x" * MAX_NAME_LENGTH])
def test_ordinary_names_pass(name: str) -> None:
    assert is_safe_name(name) and check_safe_name(name) == name


@pytest.mark.parametrize("name, why", [
    ("../../x", "start with a letter"), ("/etc/passwd", "start with a letter"), ("a/b", "'/'"),
    ("a\\b", "'\\\\\\\\'"), ("", "empty"), (".hidden", "start with a letter"), ("-rf", "start with a letter"),
    ("KMgH₃", "non-ASCII"), ("a\nb", "'\\\\n'"), ("a b", "' '"), ("a:b", "':'"), ("x" * 129, "longer"),
    ("a\0b", "'\\\\x00'"),
])
def test_names_that_could_escape_or_corrupt_are_refused(name: str, why: str) -> None:
    assert not is_safe_name(name)
    with pytest.raises(C2NPInputError, match=why):
        check_safe_name(name, what="material id")


def test_non_strings_and_case_clashes_are_refused() -> None:
    assert not is_safe_name(None) and not is_safe_name(b"KMgH3")
    with pytest.raises(C2NPInputError, match="not a string"):
        check_safe_name(42)
    check_distinct_names(["KMgH3", "NaMgH3"])
    with pytest.raises(C2NPInputError, match="differ only in case.*'KMgH3' and 'kmgh3'"):
        check_distinct_names(["KMgH3", "kmgh3"])
