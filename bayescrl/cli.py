"""The ``bayescrl`` command line: one entry point, sub-commands per family (loaded lazily).

Each family owns its command in its own module (see ``COMMANDS``) so that ``bayescrl --help`` stays fast
and importing one family never imports another's heavy dependencies.
"""

from __future__ import annotations

import importlib
import sys

import click

from bayescrl import __version__
from bayescrl.utils.errors import BayesCRLError
from bayescrl.utils.runlog import setup_logging

# command name -> "module:attribute" of a click.Command
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("bayescrl.commands.demo:demo", "Run the headline job on a small default and plot it."),
    "infer": ("bayescrl.commands.infer:infer", "Fit a posterior to a model spec / data file; write NetCDF."),
    "simulate": ("bayescrl.commands.infer:simulate", "Generate synthetic offline preference data."),
    "compare": ("bayescrl.commands.infer:compare", "Compare inference engines on one model and data."),
    "bandit": ("bayescrl.commands.bandit:bandit", "warmPref-PS linear-bandit experiments."),
    "pspl": ("bayescrl.commands.pspl:pspl", "PSPL preference-based RL experiments."),
    "train": ("bayescrl.commands.train:train", "Train a constrained RL agent (e-COP, ACPO, baselines)."),
    "evaluate": ("bayescrl.commands.train:evaluate", "Re-run a saved constrained RL policy."),
    "mopo": ("bayescrl.commands.mopo:mopo", "MOPO multi-objective preference optimisation."),
    "examples": (
        "bayescrl.commands.examples:examples",
        "List the shipped example configs or copy them to DIR.",
    ),
    "prefs": (
        "bayescrl.commands.prefs:prefs",
        "Export pending preference queries to a labelling page; import labels.",
    ),
    "sweep": ("bayescrl.sweep.cli:sweep", "Run a grid of runs (algos x envs x seeds x --set) on Ray."),
    "report": ("bayescrl.sweep.cli:report", "Tabulate a sweep: mean ± sd over seeds, curves."),
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported only when invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        target = COMMANDS[name][0]
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("bayescrl"):
                return _unavailable(name, f"not implemented yet ({exc.name} missing)")
            raise
        return getattr(module, attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, help_) in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _unavailable(name: str, why: str) -> click.Command:
    @click.command(name=name, help=why)
    def _cmd() -> None:
        raise click.ClickException(f"'{name}' is {why}")

    return _cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bayescrl")
@click.option("-v", "--verbose", count=True, help="More log lines on stderr (-v: debug).")
@click.option("-q", "--quiet", count=True, help="Fewer log lines on stderr (-q: warnings only, -qq: errors).")
def cli(verbose: int, quiet: int) -> None:
    """bayescrl: Bayesian constrained and preference-based RL (warmPref-PS, PSPL, ACPO, e-COP, MOPO).

    Status lines go to stderr through Python logging (``-q``/``-v``); results go to stdout.
    """
    setup_logging(verbose - quiet)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: user errors print one clear line and exit with status 2."""
    try:
        cli.main(args=argv, standalone_mode=False)
    except BayesCRLError as exc:
        text = "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip())  # always one line
        click.echo(f"error: {text}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


if __name__ == "__main__":  # pragma: no cover
    main()
