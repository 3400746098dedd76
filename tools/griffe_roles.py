"""Griffe extension for the API reference: the package's docstrings use reStructuredText
cross-reference roles (``:class:`~c2np.store.DatasetStore```, ``:func:`carve```); in the
Markdown site they become code spans (``DatasetStore``, ``carve``)."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")


def plain(text: str) -> str:
    """Docstring text with every role replaced by a code span (``~`` keeps the last name)."""
    return ROLE.sub(lambda m: f"`{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}`", text)


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every loaded object's docstring."""

    def on_object(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
