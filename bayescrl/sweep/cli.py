"""``bayescrl sweep SWEEP.yaml --out DIR`` and ``bayescrl report DIR``.

Examples::

    bayescrl sweep examples/sweeps/smoke.yaml --out runs/smoke            # local Ray, or a process pool
    bayescrl sweep examples/sweeps/smoke.yaml --out runs/s2 --set args.total-steps=1000 --set grid.seed=[0]
    bayescrl sweep examples/sweeps/ecop_pointcircle.yaml --out runs/pc --address auto   # a running cluster
    bayescrl sweep examples/sweeps/ecop_pointcircle.yaml --out runs/pc --resume  # skips finished runs
    bayescrl report runs/pc                                               # table + learning curves
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from bayescrl.sweep import runner
from bayescrl.sweep import spec as sweep_spec
from bayescrl.sweep.report import MANIFEST, build_report, run_done, run_summary
from bayescrl.sweep.runner import check_address, check_dir, prepare_dir, resolve_backend
from bayescrl.sweep.spec import build_runs, load_sweep, validate_runs
from bayescrl.utils.checks import check_device, positive_int, prepare_out, prepare_out_file
from bayescrl.utils.errors import ConfigError
from bayescrl.utils.outdir import prepare_out_dir, written


@click.command("sweep")
@click.argument("sweep_file", metavar="SWEEP.yaml", type=click.Path(dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Sweep folder.")
@click.option(
    "--address",
    default=None,
    help="A running Ray cluster: ray://HOST:PORT (Ray client), HOST:PORT or auto. Default: a local Ray "
    "instance started and stopped by this command (or, without Ray, a local process pool).",
)
@click.option(
    "--workers", default=None, type=int, help="Runs at a time (default: this machine's / the cluster's CPUs)."
)
@click.option(
    "--backend",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "ray", "local"]),
    help="ray: Ray Core tasks; local: a local process pool (no Ray); auto: Ray when installed.",
)
@click.option(
    "--retries", default=2, show_default=True, type=int, help="Restarts of a run whose process died."
)
@click.option("--dry-run", is_flag=True, help="Validate every grid point and list the runs; run nothing.")
@click.option("--progress/--no-progress", default=None, help="Overall bar with ETA (default: on a terminal).")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override an entry of SWEEP.yaml (repeatable), e.g. --set args.total-steps=1000 --set grid.seed=[0] "
    "--set set.config.n_envs=2.",
)
@click.option(
    "--resume", is_flag=True, help="Continue the sweep already in --out (finished runs are skipped)."
)
@click.option(
    "--device",
    default=None,
    help="Pass --device to every run (same as --set args.device=DEVICE): cpu, cuda, cuda:N or mps.",
)
def sweep(
    sweep_file, out, address, workers, backend, retries, dry_run, progress, overrides, resume, device
) -> None:
    """Run the grid of SWEEP.yaml (command x grid x seeds x --set grid); each run writes DIR/<run-id>/
    as the single command does. ``--resume`` continues a sweep in DIR: finished runs are skipped,
    unfinished ones continue from their checkpoints. Prints one line per finished run, then the report
    (bayescrl report DIR). Paths in SWEEP.yaml are relative to it."""
    if workers is not None:
        workers = positive_int(workers, "--workers")
    if retries < 0:
        positive_int(retries, "--retries", minimum=0)
    if device is not None:
        overrides = (*overrides, f"args.device={check_device(device, '--device')}")
    spec = load_sweep(sweep_file, overrides)
    out_dir = prepare_out(out, "--out", create=False)
    if not dry_run:
        check_dir(out_dir, spec)  # another sweep's folder, or other files: refused with the reason
        prepare_out_dir(out_dir, resume=resume, resumable=True, create=False)
    runs = build_runs(spec, out_dir)
    validate_runs(spec, runs)  # every grid point, before any run starts or any file is written
    chosen = resolve_backend(backend, address)
    if address is not None:
        check_address(address)
    if dry_run:
        _list_runs(runs, chosen)
        return
    t0 = time.time()
    failed = _run_grid(spec, runs, out_dir, sweep_file, chosen, workers, address, retries, progress)
    _summarise(out_dir, len(runs), failed, time.time() - t0, chosen)


def _list_runs(runs: list[sweep_spec.Run], backend: str) -> None:
    """``--dry-run``: each run's command line, and how many runs are valid."""
    for r in runs:
        click.echo(f"{r.id}: bayescrl {' '.join(r.argv)}")
    click.echo(f"{len(runs)} runs valid ({backend} backend); nothing run (--dry-run)")


class _Progress:
    """``on_done`` of :func:`runner.run_all`: one line per finished run (with its summary) or failure; the
    bar moves on; failures are kept in ``failed``."""

    def __init__(
        self,
        spec: sweep_spec.SweepSpec,
        out_dir: Path,
        bar: Any,
        write: Callable[..., None],
        total: int,
        done: int,
    ) -> None:
        self.spec, self.out_dir, self.bar, self.write = spec, out_dir, bar, write
        self.total, self.count = total, done
        self.failed: list[dict] = []

    def __call__(self, rec: dict) -> None:
        self.bar.update(1)
        self.count += 1
        k, total, out_dir = self.count, self.total, self.out_dir
        if rec["status"] == "done":
            extra = " (resumed from checkpoint)" if rec.get("resumed") else ""
            summary = run_summary(self.spec, out_dir / rec["id"])
            line = f"[{k}/{total}] {rec['id']}: done in {rec['wall_s']:.1f} s{extra}" + (
                f"; {summary}" if summary else ""
            )
        else:
            self.failed.append(rec)
            line = (
                f"[{k}/{total}] {rec['id']}: FAILED (exit {rec.get('returncode')}): {rec.get('error', '')} "
                f"-- log: {out_dir / 'logs' / (rec['id'] + '.log')}"
            )
        self.write(line, file=sys.stdout)


def _remove_unstarted(out_dir: Path, new_dir: bool) -> None:
    """Undo a sweep that could not start: its manifest, empty status/logs folders, a new empty ``out_dir``."""
    (out_dir / MANIFEST).unlink(missing_ok=True)
    for sub in ("status", "logs"):
        if (out_dir / sub).is_dir() and not any((out_dir / sub).iterdir()):
            (out_dir / sub).rmdir()
    if new_dir and not any(out_dir.iterdir()):
        out_dir.rmdir()


def _run_grid(
    spec: sweep_spec.SweepSpec, runs: list[sweep_spec.Run], out_dir: Path, sweep_file: str, backend: str,
    workers: int | None, address: str | None, retries: int, progress: bool | None,
) -> list[dict]:  # fmt: skip
    """Write the sweep's manifest, run every unfinished run (bar with ETA, a line per run); returns the
    failed runs' records. If Ray cannot start or connect, nothing is left behind."""
    new_dir, new_manifest = not out_dir.exists(), not (out_dir / MANIFEST).exists()
    prepare_out(out_dir, "--out")
    prepare_dir(out_dir, spec, runs, sweep_file)
    total = len(runs)
    show = sys.stderr.isatty() if progress is None else progress
    from tqdm.auto import tqdm

    done_before = [r for r in runs if _finished(out_dir, r, spec)]
    bar = tqdm(  # initial: the ETA counts only this session's runs
        total=total, initial=len(done_before), unit="run", desc="sweep", disable=not show, file=sys.stderr
    )
    on_done = _Progress(spec, out_dir, bar, tqdm.write, total, len(done_before))
    try:
        if done_before:
            tqdm.write(f"{len(done_before)} of {total} runs already finished (skipped)", file=sys.stdout)
        runner.run_all(
            spec,
            runs,
            out_dir,
            backend=backend,
            workers=workers,
            address=address,
            retries=retries,
            on_done=on_done,
        )
    except ConfigError:  # Ray could not start / connect: nothing ran, leave nothing behind
        if new_manifest and on_done.count == len(done_before):
            _remove_unstarted(out_dir, new_dir)
        raise
    finally:
        bar.close()
    return on_done.failed


def _summarise(out_dir: Path, total: int, failed: list[dict], took: float, backend: str) -> None:
    """The report (table, warnings), the count of finished runs, the files written; exit 1 on failures."""
    report = build_report(out_dir)
    click.echo(report["markdown"].rstrip())
    for w in report["warnings"]:
        click.echo(f"warning: {w}", err=True)
    click.echo(f"{total - len(failed)} of {total} runs finished in {took:.1f} s ({backend} backend)")
    figs = report["figures"]
    click.echo(written(out_dir, ["report.md", "report.json", *figs, MANIFEST], f"and {total} run folders"))
    if failed:
        click.echo(f"error: {len(failed)} run(s) failed: {', '.join(r['id'] for r in failed)}", err=True)
        sys.exit(1)


def _finished(out_dir: Path, run, spec) -> bool:
    return run_done(out_dir, run.id, spec.adapter.result)


@click.command("report")
@click.argument("sweep_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--plots/--no-plots", default=True, show_default=True, help="Learning-curve PNGs.")
def report(sweep_dir, plots) -> None:
    """Tabulate a sweep: mean ± sd over seeds per grid point, the thesis' numbers beside them (the sweep
    file's `reference:` block), learning curves; writes DIR/report.md, DIR/report.json, DIR/curves_*.png."""
    prepare_out(sweep_dir, "DIR", create=False)
    for name in ("report.md", "report.json") if Path(sweep_dir).is_dir() else ():  # written last: check now
        prepare_out_file(Path(sweep_dir) / name, "DIR")
    rep = build_report(Path(sweep_dir), plots=plots)
    click.echo(rep["markdown"].rstrip())
    for w in rep["warnings"]:
        click.echo(f"warning: {w}", err=True)
    click.echo(written(sweep_dir, ["report.md", "report.json", *rep["figures"]]))
