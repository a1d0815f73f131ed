"""Every torch tensor factory in the algorithm packages names its device (or is allowed, with a reason).

A tensor built without ``device=`` lands on the CPU; on ``--device cuda`` it then meets the CUDA tensors of
the update ("Expected all tensors to be on the same device"). CI has no GPU, so this AST scan is the guard:
a new ``torch.zeros(...)`` (etc.) without ``device=`` fails here. ``*_like`` factories inherit the device of
their argument and are not listed. ``ALLOWED`` names the few calls that are CPU on purpose, with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "bayescrl"
PACKAGES = ("constrained", "prefrl", "pbrl", "bandits", "mopo", "inference", "raters")
FACTORIES = {
    "zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace", "eye", "tensor",
    "as_tensor", "rand", "randn", "randint", "randperm", "normal", "bernoulli_", "scalar_tensor",
    "empty_strided", "tril_indices", "triu_indices", "sparse_coo_tensor", "from_numpy",
}  # fmt: skip
# from_numpy has no device argument: it always gives a CPU tensor sharing numpy's memory; it is listed so
# that each use is reviewed (the rollout arrays move to the device once per iteration, in compute_advantages)
NO_DEVICE_ARG = {"from_numpy"}
# a random draw with ``generator=`` is made on its generator's device (torch refuses a mismatch): the
# package's streams are CPU generators, and the draw is moved with ``.to(device)`` (or drawn through
# bayescrl.utils.seeding.draw / randint / multinomial, which do that), so a CUDA run sees the same numbers
RANDOM = {"rand", "randn", "randint", "randperm", "normal", "bernoulli"}

#: (file relative to bayescrl/, factory) -> why the calls of that factory in that file need no device=
ALLOWED: dict[tuple[str, str], str] = {
    # module parameters are created on the CPU and moved with ``module.to(device)``
    ("constrained/core/networks.py", "torch.full"): "nn.Parameter init; moved with module.to(device)",
    ("constrained/core/networks.py", "torch.empty"): "nn.Parameter init; moved with module.to(device)",
    ("constrained/core/networks.py", "torch.zeros"): "nn.Parameter init; moved with module.to(device)",
    # 0-dim scalars: a 0-dim CPU tensor combines with a tensor on any device
    ("constrained/core/ppo.py", "torch.tensor"): "0-dim scalars for torch.compile (mix with any device)",
    # a warm start given as tensors keeps their device (the caller's MAP result, on the problem's device)
    ("inference/bootstrap.py", "torch.as_tensor"): "converts a warm start that is already on its device",
}


def _factory_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch":
            if f.attr in FACTORIES:
                yield node, f"torch.{f.attr}"


def offenders(root: Path = ROOT, allowed: dict | None = None) -> list[str]:
    allowed = ALLOWED if allowed is None else allowed
    bad = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for call, name in _factory_calls(tree):
                if (rel, name) in allowed:
                    continue
                base = name.split(".", 1)[1]
                if base in NO_DEVICE_ARG:
                    if not _moved(tree, call):
                        bad.append(f"{rel}:{call.lineno}: {name}(...) not followed by .to(...)")
                    continue
                names = {k.arg for k in call.keywords}
                if base in RANDOM and "generator" in names:
                    continue  # drawn where its generator lives (a CUDA tensor with a CPU generator raises)
                if "device" not in names and not _kwargs_splat(call):
                    bad.append(f"{rel}:{call.lineno}: {name}(...) without device=")
    return bad


def _kwargs_splat(call: ast.Call) -> bool:
    return any(k.arg is None for k in call.keywords)  # **kwargs: the caller's device may be in it


def _moved(tree: ast.AST, call: ast.Call) -> bool:
    """``torch.from_numpy(x).to(...)`` (possibly through ``.reshape``/``.float`` etc. in between)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to":
            inner = node.func.value
            while isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
                if inner is call:
                    return True
                inner = inner.func.value
            if inner is call:
                return True
    return False


def test_every_factory_names_its_device():
    bad = offenders()
    assert not bad, "tensor factories without device= (pass device=..., or use *_like):\n" + "\n".join(bad)


def test_allow_list_entries_still_exist():
    """A stale allow-list entry hides nothing; drop it when the call goes."""
    for rel, name in ALLOWED:
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        assert any(n == name for _, n in _factory_calls(tree)), (rel, name)


@pytest.mark.parametrize(
    "src, n_bad",
    [
        ("import torch\nx = torch.zeros(3)\n", 1),
        ("import torch\nx = torch.zeros(3, device=d)\n", 0),
        ("import torch\nx = torch.zeros_like(y)\n", 0),
        ("import torch\nx = torch.randn(3, dtype=torch.float64)\n", 1),
        ("import torch\nx = torch.randn(3, generator=g, dtype=torch.float64)\n", 0),  # on g's device
        ("import torch\nx = torch.full((3,), 1.0, generator=g)\n", 1),  # not a random draw
        ("import torch\nx = torch.tensor([1.0], **kw)\n", 0),
        ("import torch\nx = torch.from_numpy(a)\n", 1),
        ("import torch\nx = torch.from_numpy(a).reshape(2).to(dev)\n", 0),
    ],
)
def test_guard_catches_a_new_offender(tmp_path, src, n_bad):
    """The scan itself: a factory without ``device=`` is reported, one with it (or ``*_like``) is not."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
    (tmp_path / "constrained" / "new.py").write_text(src)
    assert len(offenders(tmp_path, allowed={})) == n_bad


# ------------------------------------------------------------------------------ the --device option
EX = Path(__file__).resolve().parents[1] / "examples"
DEVICE_COMMANDS = {
    "train": ["train", "--algo", "ecop", "--env", "bayescrl/PointCircle-v0", "--out", "{tmp}/o"],
    "evaluate": ["evaluate", "{tmp}"],
    "pspl": ["pspl", str(EX / "pspl" / "intro_riverswim.yaml"), "--out", "{tmp}/o"],
    "bandit": ["bandit", "--out", "{tmp}/o"],
    "demo": ["demo", "--out", "{tmp}/o"],
    "infer": ["infer", str(EX / "core" / "example_data.json"), "--out", "{tmp}/p.nc"],
    "compare": ["compare", str(EX / "core" / "example_data.json"), "--out", "{tmp}/o"],
    "mopo": ["mopo", str(EX / "mopo" / "tabular_mopo.yaml"), "--out", "{tmp}/o"],
    "sweep": ["sweep", str(EX / "sweeps" / "smoke.yaml"), "--out", "{tmp}/o"],
}


def test_every_computing_command_has_a_device_option():
    import click

    from bayescrl.cli import COMMANDS, cli

    no_device = {"examples", "prefs", "report", "simulate"}  # no tensors to place
    names = set(COMMANDS) - no_device
    assert names == set(DEVICE_COMMANDS), names ^ set(DEVICE_COMMANDS)
    ctx = click.Context(cli)
    for name in names:
        assert any(p.name == "device" for p in cli.get_command(ctx, name).params), name


@pytest.mark.parametrize("name", sorted(DEVICE_COMMANDS))
@pytest.mark.parametrize("device", ["gpu0", "cuda:99"])
def test_bad_device_exits_2_with_one_line(name, device, tmp_path, capsys):
    """A value that is not a device, or a GPU this machine lacks: exit 2 before any work, one line."""
    from cli_utils import run

    args = [a.replace("{tmp}", str(tmp_path)) for a in DEVICE_COMMANDS[name]] + ["--device", device]
    code, err = run(args, capsys)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "--device" in lines[0] and device in lines[0], (code, err)
    assert not (tmp_path / "o").exists()


def test_sweep_passes_device_to_every_run(tmp_path, capsys):
    args = ["sweep", str(EX / "sweeps" / "smoke.yaml"), "--out", str(tmp_path / "s"), "--dry-run"]
    try:
        from bayescrl.cli import main

        main([*args, "--device", "cpu"])
    except SystemExit as exc:
        assert exc.code == 0, capsys.readouterr().err
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ": bayescrl train " in ln]
    assert len(lines) == 4 and all("--device cpu" in ln for ln in lines), lines
