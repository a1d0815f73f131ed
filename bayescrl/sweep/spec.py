"""The sweep file: parsing, the grid's expansion into runs (ids, command lines, the commands' parameters)
and up-front validation.

::

    command: train                       # train | bandit | pspl | mopo
    grid: {algo: [ecop, ppo-lag], env: [bayescrl/PointCircle-v0], seed: [0, 1, 2, 3, 4]}
    args: {total-steps: 200000, cost-limit: 10}   # the command's own options, the same for every run
    set: {config.pi_lr: [3.0e-4, 1.0e-3]}         # --set overrides: a list is a grid axis, a scalar fixed
    reference: {source: ..., rows: [{match: {algo: ecop}, train_final_return: 110.5}]}  # optional
    report: {metrics: [final_return, final_costs.*], curves: [ep_return, ep_costs.0]}     # optional

The runs are the Cartesian product of ``grid`` and the list-valued entries of ``set``. A grid or ``args``
key is an option of the command (``total-steps`` or ``total_steps``), its positional ``config`` file, or
``seed``, which each command receives in its own way (``train --seed S``; ``bandit``/``pspl`` ``--seeds 1
--set seed=S``, so every seed is its own run and its result does not depend on which other seeds share a
batch; ``mopo --set mopo.seed=S``, or ``seed_key``). ``bandit``/``pspl`` also take ``algo`` (one agent,
``--set agents=[ALGO]``) and ``pspl`` ``env`` (``--set env.name=ENV``). How a command is seeded, aliased,
checked, resumed and called is its own business: its module's ``sweep_adapter``
(:class:`~bayescrl.commands.sweepable.SweepAdapter`), found through :data:`ADAPTERS`.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import itertools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from bayescrl.cli import COMMANDS as CLI_COMMANDS
from bayescrl.commands.sweepable import SweepAdapter
from bayescrl.sweep.target import CALL, RESULT, resolve
from bayescrl.utils.configpaths import config_relative
from bayescrl.utils.errors import BayesCRLError, ConfigError
from bayescrl.utils.io import apply_overrides, check_keys, load_yaml

SWEEP_KEYS = (
    "command",
    "grid",
    "args",
    "set",
    "reference",
    "report",
    "name",
    "description",
    "seed_key",
    "target",
    "exclude",
)
#: options the sweep sets itself (per run) and a sweep file may not give
RESERVED = ("out", "resume", "set", "overrides", "progress", "no-progress", "help", "force")
#: the commands a sweep file may name: ``call`` (:data:`CALL_ADAPTER`) and commands whose module (in
#: ``bayescrl.cli.COMMANDS``) exports a ``sweep_adapter`` (a :class:`~.commands.sweepable.SweepAdapter`)
SWEEPABLE = ("train", "bandit", "pspl", "call", "mopo")


@dataclass(frozen=True)
class CallAdapter:
    """``command: call``: what the runner and the report need of a command's adapter (a run writes
    ``result.json``; the report tabulates the sweep file's ``report.metrics``; no curves, no resume)."""

    result: str = RESULT
    metrics: tuple[str, ...] = ()
    curve_file: str | None = None
    curve_x: str | None = None
    curves: tuple[str, ...] = ()
    checkpoint: str | None = None
    resume: str | None = None


CALL_ADAPTER = CallAdapter()


class _Adapters(Mapping[str, Any]):
    """Command name -> its ``sweep_adapter``, imported from the command's module when first asked for
    (so that ``bayescrl report`` on a ``bandit`` sweep never imports ``train``'s dependencies)."""

    def __getitem__(self, name: str) -> SweepAdapter | CallAdapter:
        if name not in SWEEPABLE:
            raise KeyError(name)
        if name == "call":
            return CALL_ADAPTER
        module = CLI_COMMANDS[name][0].split(":")[0]
        return importlib.import_module(module).sweep_adapter

    def __contains__(self, name: object) -> bool:
        return name in SWEEPABLE

    def __iter__(self):
        return iter(SWEEPABLE)

    def __len__(self) -> int:
        return len(SWEEPABLE)


#: every command's sweep adapter, by command name
ADAPTERS = _Adapters()


def get_command(name: str) -> click.Command:
    """The click command behind ``name`` (its options are what a sweep file's keys may name)."""
    return ADAPTERS[name].command


@dataclass
class Run:
    """One grid point: its id, values, the command line a user would type for it (without the program
    name; shown by ``--dry-run``, in ``sweep.json`` and the logs) and what its process calls with:
    the command's parameters as that command line gives them (JSON values). ``resume_*``: the same for a
    run that continues from its checkpoint (None: it restarts from scratch)."""

    id: str
    point: dict[str, Any]
    argv: list[str]
    resume_argv: list[str] | None
    out: Path
    params: dict[str, Any] = field(default_factory=dict)
    resume_params: dict[str, Any] | None = None


@dataclass
class SweepSpec:
    command: str
    grid: dict[str, list]
    args: dict[str, Any]
    set_fixed: dict[str, Any]
    set_grid: dict[str, list]
    reference: dict
    report: dict
    name: str
    seed_key: str | None
    raw: dict
    target: str | None = None  #: ``command: call``: FILE.py:FUNCTION or MODULE:FUNCTION
    #: grid axes whose values are mappings (linked options): axis -> {case name: its options}
    cases: dict[str, dict[str, dict]] = field(default_factory=dict)
    #: grid points left out: a point matching every axis of one entry (axis -> allowed values) is not run
    exclude: list[dict[str, list]] = field(default_factory=list)

    @property
    def adapter(self) -> SweepAdapter | CallAdapter:
        """The command's sweep adapter (``call``: :data:`CALL_ADAPTER`)."""
        return ADAPTERS[self.command]

    @property
    def hash(self) -> str:
        """Hash of what the runs depend on (``reference``/``report``/``name`` may change)."""
        keep = {
            k: self.raw.get(k) for k in ("command", "grid", "args", "set", "seed_key", "target", "exclude")
        }
        for key in ("target", "exclude"):
            if keep[key] is None:
                del keep[key]  # the hash of sweeps written before ``target``/``exclude`` existed is unchanged
        return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:16]

    @property
    def axes(self) -> dict[str, list]:
        """Every varying axis in order: grid keys (seed last), then ``set`` keys."""
        grid = {k: list(self.cases[k]) if k in self.cases else v for k, v in self.grid.items() if k != "seed"}
        return {**grid, **self.set_grid, **({"seed": self.grid["seed"]} if "seed" in self.grid else {})}

    def points(self) -> list[dict[str, Any]]:
        """Every grid point (axis -> value; a case axis by its case name), less the excluded ones."""
        axes = self.axes
        points = [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]
        return [p for p in points if not any(all(p[k] in v for k, v in e.items()) for e in self.exclude)]


#: sweep-file keys (in ``args``, ``grid`` and cases) whose values are files the runs read: resolved
#: against the sweep file (``config: ../warmpref/default.yaml``), as is a ``target: FILE.py:FUNCTION``
PATH_ARGS = ("config", "preferences", "model")


def load_sweep(path: str | Path, overrides: tuple[str, ...] | list[str] = ()) -> SweepSpec:
    """Read and check a sweep file (structure only; :func:`validate_runs` checks every run's values).

    File paths in it resolve against the sweep file (:data:`PATH_ARGS`, ``target``); ``overrides``
    (``sweep --set KEY=VALUE``: ``args.total-steps=500``, ``grid.seed=[0]``, ``set.config.n_envs=2``)
    change the file's entries after that, so a path given there is relative to the current folder. The
    sweep's hash (what resuming checks) is that of the file's text with the overrides."""
    data = load_yaml(path)
    spec = parse_sweep(override_sweep(_resolve_paths(data, path), overrides))
    spec.raw = override_sweep(data, overrides)
    return spec


def override_sweep(data: Mapping[str, Any], overrides: tuple[str, ...] | list[str]) -> dict:
    """``--set`` items applied to a sweep file with the one override parser; a ``set.KEY=VALUE`` item sets
    the ``set:`` entry ``KEY`` (itself a dotted --set key of the runs, such as ``config.n_envs``)."""
    out = dict(data)
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        if key.startswith("set.") and "=" in item:
            value = apply_overrides({}, [f"v={item.split('=', 1)[1]}"])["v"]
            out["set"] = {**(out.get("set") or {}), key[4:]: value}
        else:
            out = apply_overrides(out, [item])
    return out


def _resolve_paths(data: Mapping[str, Any], sweep_file: str | Path) -> dict:
    """A copy of the sweep file's data with its file paths made relative to the sweep file."""
    out = copy.deepcopy(dict(data))
    args, grid = out.get("args"), out.get("grid")
    if out.get("command") == "call":  # a call's job keys are the function's own
        args = grid = None
    for key in PATH_ARGS:
        if isinstance(args, dict) and key in args:
            args[key] = config_relative(args[key], sweep_file)
        if isinstance(grid, dict) and isinstance(grid.get(key), list):
            grid[key] = [config_relative(v, sweep_file) for v in grid[key]]
    for values in (grid or {}).values() if isinstance(grid, dict) else ():
        for case in values if isinstance(values, list) else ():
            if isinstance(case, dict):
                for key in PATH_ARGS:
                    if key in case:
                        case[key] = config_relative(case[key], sweep_file)
    target = out.get("target")
    if isinstance(target, str) and ".py:" in target:
        where, _, name = target.rpartition(":")
        out["target"] = f"{config_relative(where, sweep_file)}:{name}"
    return out


def _as_list(value: Any, field_: str) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ConfigError(field_, value, "an empty list gives no runs")
    if len({json.dumps(v, sort_keys=True, default=str) for v in values}) < len(values):
        raise ConfigError(field_, value, "repeats a value")
    return values


def parse_sweep(data: Mapping[str, Any]) -> SweepSpec:
    """A sweep file's data (paths already resolved) checked for structure and made a :class:`SweepSpec`;
    the first problem raises :class:`ConfigError` naming its field (:func:`validate_runs` checks the
    values)."""
    check_keys(data, SWEEP_KEYS, "sweep")
    command = data.get("command")
    if command not in ADAPTERS:
        raise ConfigError("command", command, f"must be one of {', '.join(ADAPTERS)}")
    sections = _sections(data)
    grid = {str(k): _as_list(v, f"grid.{k}") for k, v in sections["grid"].items()}
    cases = {
        k: _cases(k, v, grid, sections) for k, v in grid.items() if any(isinstance(x, Mapping) for x in v)
    }
    _check_case_axes(cases)
    set_grid = {str(k): _as_list(v, f"set.{k}") for k, v in sections["set"].items() if isinstance(v, list)}
    set_fixed = {str(k): v for k, v in sections["set"].items() if not isinstance(v, list)}
    _check_grid_and_args(grid, sections["args"])
    target = data.get("target")
    _check_target(command, target, sections["report"])
    seed_key = data.get("seed_key")
    if seed_key is not None and not isinstance(seed_key, str):
        raise ConfigError("seed_key", seed_key, "must be a dotted config key, e.g. mopo.seed")
    spec = SweepSpec(
        command=command,
        grid=grid,
        args={str(k): v for k, v in sections["args"].items()},
        set_fixed=set_fixed,
        set_grid=set_grid,
        reference=sections["reference"],
        report=sections["report"],
        name=str(data.get("name") or ""),
        seed_key=seed_key,
        raw=dict(data),
        target=target,
        cases=cases,
    )
    spec.exclude = _exclude(data.get("exclude"), spec.axes)
    _check_reference(spec)
    _check_report(spec)
    return spec


def _sections(data: Mapping[str, Any]) -> dict[str, dict]:
    """The sweep file's mapping sections (``grid``, ``args``, ``set``, ``reference``, ``report``) as dicts;
    a missing one is empty."""
    sections = {}
    for name in ("grid", "args", "set", "reference", "report"):
        value = data.get(name) or {}
        if not isinstance(value, Mapping):
            raise ConfigError(name, value, "must be a mapping")
        sections[name] = dict(value)
    return sections


def _check_grid_and_args(grid: dict[str, list], args: dict) -> None:
    """A key is either a grid axis or in ``args``, never an option the sweep sets itself
    (:data:`RESERVED`); grid seeds are integers >= 0."""
    for key in grid:
        if key in args:
            raise ConfigError(f"args.{key}", args[key], "is also a grid axis; give it once")
    for key in args:
        if str(key).replace("_", "-") in RESERVED:
            raise ConfigError(f"args.{key}", args[key], "is set by the sweep for every run")
    for key in grid:
        if key.replace("_", "-") in RESERVED:
            raise ConfigError(f"grid.{key}", grid[key], "is set by the sweep for every run")
    for s in grid.get("seed", ()):
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ConfigError("grid.seed", s, "seeds must be integers >= 0")


def _check_target(command: str, target: Any, report: dict) -> None:
    """``command: call`` needs a ``target`` and the ``report.metrics`` to tabulate; no other command takes
    a target."""
    if command == "call":
        if not isinstance(target, str) or ":" not in target.strip(":"):
            raise ConfigError(
                "target", target, "command call needs target: FILE.py:FUNCTION or MODULE:FUNCTION"
            )
        if not (report.get("metrics")):
            raise ConfigError("report.metrics", None, "command call needs the result keys to tabulate")
    elif target is not None:
        raise ConfigError("target", target, "only command call takes a target")


def _exclude(value: Any, axes: dict[str, list]) -> list[dict[str, list]]:
    """``exclude: [{task: PointNavigation, algo: [cpo, pcpo]}, ...]``: each entry maps grid axes to a value
    or a list of values (a case axis by its case names); a point matching every axis of an entry is left
    out. Unknown axes and values are refused by name."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(e, Mapping) and e for e in value):
        raise ConfigError("exclude", value, "must be a list of mappings {axis: value or [values]}")
    out = []
    for i, entry in enumerate(value):
        check_keys(entry, tuple(axes), f"exclude[{i}]")
        rule = {}
        for axis, vals in entry.items():
            vals = vals if isinstance(vals, list) else [vals]
            for v in vals:
                if v not in axes[axis]:
                    raise ConfigError(f"exclude[{i}].{axis}", v, f"is not a value of grid axis {axis}")
            rule[str(axis)] = vals
        out.append(rule)
    return out


def _cases(axis: str, values: list, grid: dict, sections: dict) -> dict[str, dict]:
    """A grid axis of linked options: ``[{name: PointCircle, env: ..., cost-limit: 10, set: {...}}, ...]``;
    every value a mapping with a unique ``name``; its keys are options of the command (as in ``args``) or
    ``set`` (overrides), none of them also given by ``args``, ``set`` or another grid axis."""
    out: dict[str, dict] = {}
    for i, case in enumerate(values):
        where = f"grid.{axis}[{i}]"
        if not isinstance(case, Mapping):
            raise ConfigError(where, case, "an axis of cases takes mappings only: {name: ..., OPTION: value}")
        name = case.get("name")
        if not isinstance(name, str) or not name or name in out:
            raise ConfigError(f"{where}.name", name, "every case needs a unique name (text)")
        sets = case.get("set") or {}
        if not isinstance(sets, Mapping):
            raise ConfigError(f"{where}.set", sets, "must be a mapping of --set overrides")
        for key in case:
            if key in ("name", "set"):
                continue
            if key in sections["args"] or key in grid or key == "seed":
                raise ConfigError(f"{where}.{key}", case[key], "is also given outside the case; give it once")
            if str(key).replace("_", "-") in RESERVED:
                raise ConfigError(f"{where}.{key}", case[key], "is set by the sweep for every run")
        for key in sets:
            if key in sections["set"]:
                raise ConfigError(f"{where}.set.{key}", sets[key], "is also in the sweep's set; give it once")
        out[name] = dict(case)
    return out


def _check_case_axes(cases: dict[str, dict[str, dict]]) -> None:
    """Two axes of cases may not give the same option or ``set`` key (the later one would win silently)."""
    owner: dict[str, str] = {}
    for axis, by_name in cases.items():
        for name, case in by_name.items():
            keys = [k for k in case if k not in ("name", "set")] + [f"set.{k}" for k in case.get("set") or {}]
            for key in keys:
                if owner.setdefault(key, axis) != axis:
                    raise ConfigError(
                        f"grid.{axis}[{name}].{key}", case.get(key, (case.get("set") or {}).get(key[4:])),
                        f"is also given by the cases of grid.{owner[key]}; give it once",
                    )  # fmt: skip


def _check_reference(spec: SweepSpec) -> None:
    ref = spec.reference
    if not ref:
        return
    check_keys(ref, ("source", "rows"), "reference")
    rows = ref.get("rows") or []
    if not isinstance(rows, list):
        raise ConfigError("reference.rows", rows, "must be a list of {match: {...}, METRIC: number}")
    axes = [k for k in spec.axes if k != "seed"]
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping) or not isinstance(row.get("match", {}), Mapping):
            raise ConfigError("reference.rows", row, "expected {match: {KEY: VALUE}, METRIC: number}", i)
        check_keys(row.get("match", {}), axes, f"reference.rows[{i}].match")
        for key, value in row.items():
            if key != "match" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"reference.rows[{i}].{key}", value, "must be a number")


def _check_report(spec: SweepSpec) -> None:
    check_keys(spec.report, ("metrics", "curves", "pivot", "ratios"), "report")
    for key in ("metrics", "curves"):
        value = spec.report.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise ConfigError(f"report.{key}", value, "must be a list of (dotted, * wildcard) keys")
    ratios = spec.report.get("ratios")
    if ratios is not None and (
        not isinstance(ratios, Mapping)
        or not all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) and "*" not in x for x in v)
            for v in ratios.values()
        )
    ):
        raise ConfigError("report.ratios", ratios, "must be {NAME: [NUMERATOR, DENOMINATOR]} of metric keys")
    pivot = spec.report.get("pivot")
    if pivot is None:
        return
    if not isinstance(pivot, Mapping):
        raise ConfigError("report.pivot", pivot, "must be {rows: AXIS, columns: AXIS, cells: [METRIC, ...]}")
    check_keys(pivot, ("rows", "columns", "cells"), "report.pivot")
    varying = [k for k, v in spec.axes.items() if len(v) > 1 and k != "seed"]
    for key in ("rows", "columns"):
        if pivot.get(key) not in spec.axes or pivot.get(key) == "seed":
            raise ConfigError(f"report.pivot.{key}", pivot.get(key), f"must be a grid axis: one of {varying}")
    others = set(varying) - {pivot["rows"], pivot["columns"]}
    if pivot["rows"] == pivot["columns"] or others:
        raise ConfigError("report.pivot", pivot, f"rows and columns must be two axes covering {varying}")
    cells = pivot.get("cells")
    # a wildcard cell names the column of a report.metrics pattern that matches one key per run (one data
    # set per run: runs.*.policy_mean.y1); derived ratios are cells too
    named = [*(spec.report.get("metrics") or []), *(spec.report.get("ratios") or {})]
    if (
        not isinstance(cells, list)
        or not cells
        or not all(isinstance(c, str) and ("*" not in c or c in named) for c in cells)
    ):
        raise ConfigError(
            "report.pivot.cells",
            cells,
            "must be a list of metric keys (a wildcard only as in report.metrics)",
        )


# ------------------------------------------------------------------------------------------ argv
def _options(cmd) -> dict[str, Any]:
    """Click parameters by every name a sweep file may use (``total-steps``, ``total_steps``, ``seeds``)."""
    names: dict[str, Any] = {}
    for p in cmd.params:
        if isinstance(p, click.Option):
            for opt in (*p.opts, *p.secondary_opts):
                if opt.startswith("--"):
                    names[opt[2:]] = p
        else:  # the positional CONFIG file of bandit/pspl/mopo
            names["config"] = p
        names[p.name] = p
        names[p.name.replace("_", "-")] = p
    return names


def _user_keys(cmd, adapter: SweepAdapter) -> list[str]:
    """The keys a sweep file may give for ``cmd``, each once, by the name the user knows: the long option
    (``env``, ``cost-limit``, not the parameter names ``env_id``, ``cost_limits``), ``config`` for the
    positional file, ``seed`` and the adapter's aliases; options the sweep sets itself are left out."""
    names = {"seed", *adapter.aliases}
    for p in cmd.params:
        if isinstance(p, click.Option):
            names.add(next((o[2:] for o in p.opts if o.startswith("--")), p.name.replace("_", "-")))
        else:
            names.add("config")
    return sorted(names - set(RESERVED) - {"seeds"})


def _yaml_value(value: Any) -> str:
    """A value as YAML flow text for ``--set KEY=VALUE`` (parsed back by the one override parser)."""
    if isinstance(value, str):
        return value
    return json.dumps(value)  # JSON is YAML 1.2 flow syntax


def _option_argv(param, key: str, value: Any) -> list[str]:
    if isinstance(param, click.Argument):
        return [_path(param, value)]
    flag = param.opts[0]
    if param.is_flag:
        if not isinstance(value, bool):
            raise ConfigError(key, value, "is a flag: true or false")
        if value:
            return [flag]
        return [param.secondary_opts[0]] if param.secondary_opts else []
    values = value if (param.multiple and isinstance(value, list)) else [value]
    if isinstance(value, (list, dict)) and not param.multiple:
        raise ConfigError(key, value, f"{flag} takes one value")
    out: list[str] = []
    for v in values:
        out += [flag, _path(param, v)]
    return out


def _path(param, value: Any) -> str:
    """Option values as text; relative paths (files the run reads) made absolute from the current folder."""
    text = _yaml_value(value) if not isinstance(value, bool) else str(value).lower()
    if isinstance(param.type, click.Path) and text and not Path(text).is_absolute():
        return str(Path(text).resolve())
    return text


_SAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


def _slug(key: str, value: Any) -> str:
    if key == "seed":
        return f"s{value}"
    text = str(value).split("/")[-1] if key in ("env", "config", "preferences") else _yaml_value(value)
    if key in ("config", "preferences"):
        text = Path(text).stem
    text = _SAFE.sub("-", text).strip("-") or "x"
    return text if key in ("algo", "env", "config", "task") else f"{key.split('.')[-1]}={text}"


def run_ids(spec: SweepSpec) -> list[tuple[str, dict]]:
    """``(id, point)`` per run: the varying values joined (``ecop_PointCircle-v0_pi_lr=0.001_s0``; a case
    by its name)."""
    varying = [k for k, v in spec.axes.items() if len(v) > 1 or k == "seed"]
    out, seen = [], set()
    for point in spec.points():
        parts = [_SAFE.sub("-", point[k]) if k in spec.cases else _slug(k, point[k]) for k in varying]
        rid = "_".join(parts) or "run"
        if len(rid) > 100 or rid in seen or rid.startswith(("_", ".")):
            digest = hashlib.sha1(json.dumps(point, sort_keys=True, default=str).encode()).hexdigest()[:8]
            rid = f"{rid[:90]}-{digest}"
        seen.add(rid)
        out.append((rid, point))
    return out


def _call_runs(spec: SweepSpec, out_dir: Path) -> list[Run]:
    """``command: call``: each run's job (``args``, the grid point, its cases' options, ``set`` entries as
    dotted keys, the seed under ``seed_key`` or ``seed``) and argv ``[__call__, TARGET, JOB, RESULT]``."""
    where, _, name = str(spec.target).rpartition(":")
    target = f"{Path(where).resolve()}:{name}" if where.endswith(".py") else str(spec.target)
    runs = []
    for rid, point in run_ids(spec):
        out = (out_dir / rid).resolve()
        job = copy.deepcopy(spec.args)
        sets = [f"{k}={_yaml_value(v)}" for k, v in spec.set_fixed.items()]
        for key, value in point.items():
            if key == "seed":
                job[spec.seed_key or "seed"] = value
            elif key in spec.cases:
                case = spec.cases[key][value]
                job.update({k: copy.deepcopy(v) for k, v in case.items() if k not in ("name", "set")})
                sets += [f"{k}={_yaml_value(v)}" for k, v in (case.get("set") or {}).items()]
            elif key in spec.grid:
                job[key] = copy.deepcopy(value)
        sets += [f"{k}={_yaml_value(point[k])}" for k in spec.set_grid]
        job = apply_overrides(job, sets) if sets else job
        argv = [CALL, target, json.dumps(job, sort_keys=True), str(out / RESULT)]
        runs.append(Run(rid, point, argv, None, out))
    return runs


def build_runs(spec: SweepSpec, out_dir: Path) -> list[Run]:
    """Every run's command line (``[command, ...options, --out DIR/<id>]``) and the parameters its process
    calls the command with (parsed from that line by the command's own options, here, once); unknown keys
    refused by name."""
    if spec.command == "call":
        return _call_runs(spec, out_dir)
    opts = _options(spec.adapter.command)
    return [_command_run(spec, opts, rid, point, (out_dir / rid).resolve()) for rid, point in run_ids(spec)]


def _command_run(spec: SweepSpec, opts: dict[str, Any], rid: str, point: dict[str, Any], out: Path) -> Run:
    """One grid point's run of a command: its command line (options, ``--set`` items, ``--out``), the line
    that resumes it (None: the command does not resume) and both as the command parses them."""
    adapter, cmd = spec.adapter, spec.adapter.command
    sets = [f"{k}={_yaml_value(v)}" for k, v in spec.set_fixed.items()]
    values, origin, case_sets = _point_values(spec, point)
    options, resume_options, alias_sets = _option_args(spec, opts, values, origin)
    sets += case_sets + alias_sets + [f"{k}={_yaml_value(point[k])}" for k in spec.set_grid]
    no_progress = "no_progress" in opts or "--no-progress" in opts.get("progress", _NoOpt).secondary_opts
    tail = [*(["--no-progress"] if no_progress else []), "--out", str(out)]
    argv = [spec.command, *options, *(x for item in sets for x in ("--set", item)), *tail]
    resume: list[str] | None = [spec.command, "--resume", str(out), *resume_options, *tail]
    if adapter.resume == "flag":
        resume = [*argv, "--resume"]
    resume = resume if adapter.resume else None
    run = Run(rid, point, argv, resume, out, _params(cmd, rid, argv))
    run.resume_params = None if resume is None else _params(cmd, rid, resume)
    return run


def _point_values(spec: SweepSpec, point: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """A grid point's option values (``args``, its grid values, its cases' options), where each case option
    comes from (``grid.AXIS[CASE].KEY``, for error messages) and its cases' ``--set`` items."""
    values = {**spec.args, **{k: v for k, v in point.items() if k in spec.grid and k not in spec.cases}}
    origin: dict[str, str] = {}
    sets: list[str] = []
    for axis in spec.cases:
        case = spec.cases[axis][point[axis]]
        for key, value in case.items():
            if key == "set":
                sets += [f"{k}={_yaml_value(v)}" for k, v in value.items()]
            elif key != "name":
                values[key], origin[key] = value, f"grid.{axis}[{point[axis]}].{key}"
    return values, origin, sets


def _option_args(
    spec: SweepSpec, opts: dict[str, Any], values: dict[str, Any], origin: dict[str, str]
) -> tuple[list[str], list[str], list[str]]:
    """A run's values as command-line options (the seed as the adapter gives it), the options its resume
    line repeats, and the ``--set`` items of the adapter's aliases; a key the command refuses or lacks is
    one line naming where the sweep file gives it."""
    adapter, cmd = spec.adapter, spec.adapter.command
    argv: list[str] = []
    resume: list[str] = []
    sets: list[str] = []
    for key, value in values.items():
        where = origin.get(key) or (f"grid.{key}" if key in spec.grid else f"args.{key}")
        if key == "seed":
            argv += adapter.seed(value, spec.seed_key)
            continue
        if key in adapter.refused:
            raise ConfigError(where, value, adapter.refused[key])
        if key in adapter.aliases:
            sets.append(adapter.aliases[key](value))
            continue
        if key not in opts:
            check_keys({key: value}, _user_keys(cmd, adapter), where.rsplit(".", 1)[0])
        param = opts[key]
        if param.name in ("out", "out_dir", "resume_dir", "overrides", "progress", "no_progress"):
            raise ConfigError(where, value, "is set by the sweep for every run")
        piece = _option_argv(param, where, value)
        argv += piece
        if param.name in adapter.resume_options:
            resume += piece
    return argv, resume, sets


def _params(cmd: click.Command, rid: str, argv: list[str]) -> dict[str, Any]:
    """The command's parameters for ``argv`` (``[command, ...]``) as its options parse them, in JSON
    values (what a run's process receives: lists for tuples, text for paths); a value the option refuses
    is one line naming the run."""
    try:
        ctx = cmd.make_context(argv[0], list(argv[1:]), resilient_parsing=False)
    except click.ClickException as exc:
        raise ConfigError(f"run {rid}", " ".join(argv[1:]), exc.format_message()) from None
    return json.loads(json.dumps(ctx.params, default=str))


class _NoOpt:
    secondary_opts: tuple = ()


# ------------------------------------------------------------------------------------------ validation
def validate_runs(spec: SweepSpec, runs: list[Run]) -> None:
    """Check every run with the command's own validator (its adapter's ``check``) before any run starts
    (one line on error, naming the grid point)."""
    if spec.command == "call":
        _validate_calls(spec, runs)
        return
    check = validator(spec.command)
    seen: set[str] = set()
    for run in runs:
        params = {k: v for k, v in run.params.items() if k not in ("out", "out_dir")}
        key = json.dumps(params, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        try:
            check(params)
        except BayesCRLError as exc:
            where = ", ".join(f"{k}={v}" for k, v in run.point.items()) or run.id
            raise type(exc)(exc.field, exc.value, f"{exc.reason} (grid point {where})") from None


def _validate_calls(spec: SweepSpec, runs: list[Run]) -> None:
    """``command: call``: the target must import; its module's ``validate_job(job)``, when it has one,
    checks every run's job (a ``BayesCRLError`` or ``ValueError`` is one line naming the grid point)."""
    try:
        fn = resolve(str(spec.target))
    except Exception as exc:  # noqa: BLE001 - any import problem is the user's target
        raise ConfigError("target", spec.target, f"cannot import: {type(exc).__name__}: {exc}") from None
    check = getattr(__import__("sys").modules.get(fn.__module__), "validate_job", None)
    for run in runs:
        if check is None:
            break
        try:
            check(json.loads(run.argv[2]))
        except (BayesCRLError, ValueError, KeyError, TypeError) as exc:
            where = ", ".join(f"{k}={v}" for k, v in run.point.items()) or run.id
            raise ConfigError(f"run {run.id}", where, str(exc)) from None


def validator(command: str) -> Callable[[dict], None]:
    """The command's own validator: its sweep adapter's ``check(params)``."""
    return ADAPTERS[command].check
