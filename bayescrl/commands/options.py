"""Click options shared by several commands (``--force``; ``--log-dir``/``--wandb``)."""

from __future__ import annotations

import click

__all__ = ["force_option", "log_options"]


def force_option(fn):
    """``--force``: write into a non-empty output folder (passed as ``force``)."""
    return click.option(
        "--force",
        is_flag=True,
        help="Write into a non-empty --out (files of the same name are replaced).",
    )(fn)


def log_options(fn):
    """``--log-dir DIR`` and ``--wandb/--no-wandb`` for a command (passed as ``log_dir``, ``wandb``)."""
    fn = click.option(
        "--wandb/--no-wandb",
        "wandb",
        default=None,
        help="Also log to Weights & Biases (needs wandb installed and --log-dir; default: $BAYESCRL_WANDB).",
    )(fn)
    fn = click.option(
        "--log-dir",
        "log_dir",
        default=None,
        type=click.Path(file_okay=False),
        help="Write TensorBoard scalars here (needs 'bayescrl[log]'); view with tensorboard --logdir DIR.",
    )(fn)
    return fn
