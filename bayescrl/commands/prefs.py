"""``bayescrl prefs``: label a run's pending preference queries by hand.

Examples::

    bayescrl prefs export runs/ecop-circle            # writes runs/ecop-circle/queries/labels.html
    # open the page in a browser, label, "Download labels.json", then:
    bayescrl prefs import runs/ecop-circle ~/Downloads/labels.json
    bayescrl train --resume runs/ecop-circle
"""

from __future__ import annotations

import shlex

import click

from bayescrl.prefrl.labels import export_queries, import_labels, load_pending


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def prefs() -> None:
    """Label pending preference queries by hand (runs whose preference spec says ``labels: external``)."""


@prefs.command("export")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option(
    "--out",
    default=None,
    type=click.Path(dir_okay=False),
    help="Where to write the page (default RUN/queries/labels.html).",
)
def export_cmd(run_dir: str, out: str | None) -> None:
    """Write a self-contained HTML page (works offline) on which to label RUN's pending queries."""
    path = export_queries(run_dir, out)
    n = len(load_pending(run_dir)["queries"])
    click.echo(
        f"wrote {path} ({n} queries): open it in a browser, label, download labels.json, "
        f"then run: bayescrl prefs import {shlex.quote(run_dir)} labels.json"
    )


@prefs.command("import")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.argument("labels_file", metavar="LABELS", type=click.Path(dir_okay=False))
def import_cmd(run_dir: str, labels_file: str) -> None:
    """Check LABELS (labels.json from the page) against RUN's pending queries; write queries/answers.json."""
    s = import_labels(run_dir, labels_file)
    rest = f"{s['remaining']} of {s['total']} still unlabelled" if s["remaining"] else "none left unlabelled"
    click.echo(
        f"imported {s['imported']} labels for round {s['round']} into {s['answers']} ({rest}); "
        f"next: bayescrl train --resume {shlex.quote(run_dir)}"
    )
