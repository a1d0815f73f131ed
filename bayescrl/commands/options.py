"""Click options shared by several commands: ``--set``, ``--progress``, ``--force``, ``--log-dir``,
``--wandb``."""

from __future__ import annotations

import click

__all__ = ["device_option", "force_option", "log_options", "progress_option", "set_option"]


def device_option(fn=None, *, default: str | None = None, help: str | None = None):
    """``--device``: a torch device (cpu, cuda, cuda:N, mps), checked by the command with
    :func:`bayescrl.utils.checks.check_device` (a bad value, or cuda without a GPU: exit 2, one line)."""

    def deco(f):
        text = help or "torch device: cpu, cuda, cuda:N or mps."
        return click.option("--device", default=default, show_default=default is not None, help=text)(f)

    return deco if fn is None else deco(fn)


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


def set_option(help: str):
    """``--set KEY=VALUE`` (repeatable; passed as ``overrides``), ``help`` naming the command's own keys."""
    return click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=help)


def progress_option(help: str = "Show a progress bar."):
    """``--progress/--no-progress`` (default on; passed as ``progress``)."""
    return click.option("--progress/--no-progress", default=True, show_default=True, help=help)
