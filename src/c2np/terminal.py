"""Text that is safe to show on a terminal: names and values from files written by others.

A file name or a value read from a file may hold ESC (which starts a terminal control
sequence), a newline (which forges a second line of output), other C0 and C1 control
characters, or bytes that are not UTF-8 (a path read from the system holds them as lone
surrogates, which no UTF-8 stream can encode). :func:`printable` writes each of them as a
visible escape (``\\x1b``, ``\\n``, ``\\xff``), and :func:`shortened` also cuts a long value
to its start and end, so that an error never echoes a 2 MB field.
"""

from __future__ import annotations

import re

__all__ = ["printable", "shortened", "clipped", "SHOWN_CHARS"]

#: Characters of a value shown in an error (start and end kept).
SHOWN_CHARS = 80

# C0 controls, DEL, C1 controls, lone surrogates (undecodable bytes of a path), and the
# bidirectional overrides that reorder what a terminal shows
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(value: object) -> str:
    """``str(value)`` with every control character, undecodable byte and bidirectional
    override written as a visible escape (one line, encodable as UTF-8)."""
    return _UNSAFE.sub(_escape, str(value))


def shortened(value: object, limit: int = SHOWN_CHARS) -> str:
    """:func:`printable` of ``value`` (``repr`` for strings, so the quotes show), cut to
    about ``limit`` characters keeping its start and end and saying how long it was."""
    text = repr(value) if isinstance(value, str) else str(value)
    half = max(limit // 2, 1)
    if len(text) <= limit:
        shown = printable(text)
        if len(shown) <= limit:
            return shown
    head, tail = printable(text[:half])[:half], printable(text[-half:])[-half:]
    return f"{head} … {tail} ({len(text):,} characters)"


def clipped(text: object, limit: int = 300) -> str:
    """:func:`printable` of ``text`` as it is (no quotes), cut to about ``limit`` characters
    keeping its start and end."""
    t = printable(text)
    half = max(limit // 2, 1)
    return t if len(t) <= limit else f"{t[:half]} … {t[-half:]} ({len(t):,} characters)"
