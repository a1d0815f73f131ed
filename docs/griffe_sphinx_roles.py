"""Griffe extension for the API reference: render Sphinx roles of the docstrings as inline code.

The docstrings cross-reference with reST roles (``:func:`~bayescrl.x.f```, ``:class:`Posterior```), which
Markdown would print verbatim. ``~a.b.c`` becomes ``c`` (Sphinx' short form), anything else stays whole.
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):`(~?)([^`]+)`")


def _plain(match: re.Match) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRoles(griffe.Extension):
    """Rewrite ``:role:`target``` to ```target``` in every docstring as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:  # noqa: ARG002
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = ROLE.sub(_plain, obj.docstring.value)
