"""What a command gives ``bayescrl sweep``: its :class:`SweepAdapter` (``sweep_adapter`` in its module).

A sweep file's keys name the command's options (``grid: {algo: [...]}``, ``args: {total-steps: ...}``).
For every grid point the sweep writes the command line a user would type (``--dry-run``, the logs and
``sweep.json`` show it), parses it once with the command's own click options into the command's
parameters (``{"algo": "ecop", "env_id": ..., "out_dir": ...}``, by parameter name, as click hands them to
the command), checks every run with ``check(params)`` before any run starts, and in each run's process
calls ``call(params)``: the command's checks and library call without click, so the run writes what
that command line writes. The sweep imports no other name of a command module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import click

__all__ = ["SweepAdapter", "seed_by_set"]


def seed_by_set(seed: int, key: str | None) -> list[str]:
    """A run of seed ``seed`` for commands that batch ``--seeds N`` seeds: one seed, set by ``--set``."""
    return ["--seeds", "1", "--set", f"{key or 'seed'}={seed}"]


@dataclass(frozen=True)
class SweepAdapter:
    """How ``bayescrl sweep`` runs one command (see the module's docstring and docs/sweep.md)."""

    #: the click command: its options are the keys a sweep file may give; it parses each run's command
    #: line once, in the sweep's process (never in the run's)
    command: click.Command
    #: the run, in its own process: the command's parameters (JSON values: lists for tuples, text for
    #: paths) -> the result; checks them, calls the library, prints what the command prints
    call: Callable[[dict[str, Any]], Any]
    #: every run's parameters (``out`` left out) before any run starts; raises ``ConfigError``
    check: Callable[[dict[str, Any]], None]
    #: the file of a run's folder that marks it finished; the report's metrics are read from it
    result: str
    #: a run's seed S (and the sweep file's ``seed_key``) -> the options that give it
    seed: Callable[[int, str | None], list[str]]
    #: the report's default metrics: dotted keys (``*`` wildcards) of the result file
    metrics: tuple[str, ...] = ()
    #: the file, x key and y-key patterns of the report's learning curves (None: no curves)
    curve_file: str | None = None
    curve_x: str | None = None
    curves: tuple[str, ...] = ()
    #: grid/args keys that are not options: key -> its ``--set KEY=VALUE`` item (``algo`` -> agents=[...])
    aliases: Mapping[str, Callable[[Any], str]] = field(default_factory=dict)
    #: options a sweep file may not give -> why (``seeds``: each seed is its own run)
    refused: Mapping[str, str] = field(default_factory=dict)
    #: the file whose presence in a run's folder means "resume" (None: a run restarts from scratch)
    checkpoint: str | None = None
    #: how a run resumes: ``"option"``: ``COMMAND --resume OUT`` with the options in ``resume_options``;
    #: ``"flag"``: the run's own command line plus ``--resume``
    resume: str | None = None
    #: parameter names a resumed run keeps (``"option"`` resumes)
    resume_options: tuple[str, ...] = ()
