"""The command layer: what ``bayescrl COMMAND`` runs (click lives here, in ``sweep`` and in ``bayescrl.cli``).

A command parses options, calls library functions a Python user can call too, and prints the result
(docs/architecture.md). :mod:`bayescrl.commands.options` holds the options several commands share.
"""
