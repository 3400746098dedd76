"""Exceptions raised by c2np. The CLI maps :class:`C2NPInputError` and
:class:`C2NPEnvironmentError` to exit code 2."""

from __future__ import annotations


class C2NPError(Exception):
    """Base class of every error c2np raises on purpose."""


class C2NPInputError(C2NPError, ValueError):
    """Bad input from a user: a malformed file, an unknown id, a value out of range.

    The message names the file (or argument), the place (line, frame, key) and the problem.
    """


class C2NPStoreError(C2NPInputError):
    """A dataset store that is missing, corrupt, truncated or inconsistent."""


class C2NPLimitError(C2NPInputError):
    """A stated limit (atoms, bytes, radii, resamples, workers) would be exceeded; the message
    names the limit and how to raise it (:mod:`c2np.limits`)."""


class C2NPNoAnswerError(C2NPInputError):
    """The input is well formed but has no answer (e.g. ``identify`` found no lattice).
    The CLI exits with code 1, not 2."""


class C2NPEnvironmentError(C2NPInputError):
    """An environment problem: a missing optional dependency, an unreachable cluster (exit
    code 2, like bad input)."""


class SamplingError(C2NPError, RuntimeError):
    """An orientation sampler ran out of trials before reaching its target count."""
