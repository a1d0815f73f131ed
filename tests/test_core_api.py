"""The Python API is as strict as the CLI: model specs and engine options refuse unknown keys and bad values
by name before any work; ``help(bayescrl)`` lists the entry points and ``import bayescrl`` stays light."""

import pydoc
import subprocess
import sys

import pytest

import bayescrl
from bayescrl.inference import fit
from bayescrl.models.spec import from_spec
from bayescrl.utils.errors import ConfigError, DataError

GOOD = {"dim": 1, "rewards": [{"x": [1.0], "r": 0.5}]}

BETA_PRIOR = {"prior": "lognormal", "loc": 0, "sd": 1}
PREF = {"x0": [1], "x1": [0], "y": 1}
SPEC_CASES = [  # (spec, field named, hint)
    ({"dim": 2, "noise_std": 0.1}, "noise_std", "'noise_sd'"),
    ({"dim": 2, "raters": [{"id": "a", "lamda": 300}]}, "raters[0].lamda", "'lam'"),
    ({"dim": 1, "prior": {"mean": [0.0], "covariance": 1.0}}, "prior.covariance", "'cov'"),
    ({"dim": 1, "raters": [{"id": "a", "beta": BETA_PRIOR}]}, "raters[0].beta.sd", "'scale'"),
    ({"dim": 1, "preferences": [{**PREF, "rator": "r0"}]}, "preferences.rator", "'rater'"),
    ({"dim": 1, "rewards": [{"x": [1.0], "r": 1.0}, {"x": [1.0], "reward": 1.0}]}, "rewards.reward", "'r'"),
    ({"dim": 1, "transitions": {"num_states": 2, "alpha": 1.0}}, "transitions.alpha", "'alpha0'"),
    ({"dim": 1, "truth": {"theta": [0.0], "seeds": 1}}, "truth.seeds", "'seed'"),
]


@pytest.mark.parametrize(("spec", "field", "hint"), SPEC_CASES, ids=[c[1] for c in SPEC_CASES])
def test_from_spec_refuses_unknown_keys_at_every_level(spec, field, hint):
    with pytest.raises(ConfigError) as exc:
        from_spec(spec)
    assert exc.value.field == field and f"unknown key; did you mean {hint}?" in str(exc.value)


def test_bad_record_keys_are_data_errors_with_the_record_index():
    with pytest.raises(DataError) as exc:
        from_spec({"dim": 1, "rewards": [{"x": [1.0], "r": 1.0}, {"x": [1.0], "reward": 1.0}]})
    assert exc.value.index == 1


FIT_CASES = [  # (engine, options, message)
    ("nuts", {"num_sample": 10}, "engine_options.num_sample = 10: unknown key; did you mean 'num_samples'?"),
    ("nuts", {"num_samples": 0}, "engine_options.num_samples = 0: must be an integer >= 1"),
    ("nuts", {"num_chains": 1.5}, "engine_options.num_chains = 1.5: must be an integer >= 1"),
    ("svi", {"learning_rate": 0.1}, "did you mean 'lr'?"),
    ("svi", {"rtol": 0}, "engine_options.rtol = 0: must be > 0"),
    ("bootstrap", {"tol": -1e-6}, "engine_options.tol = -1e-06: must be > 0"),
    ("bootstrap", {"max_steps": 5}, "did you mean 'max_iter'?"),
    ("laplace", {"max_steps": 0}, "engine_options.max_steps = 0: must be an integer >= 1"),
    ("exact", {"lr": 0.1}, "the exact engine takes no options"),
]


@pytest.mark.parametrize(("engine", "options", "message"), FIT_CASES)
def test_fit_refuses_bad_options_before_any_work(engine, options, message, monkeypatch):
    monkeypatch.setattr("bayescrl.inference.engines.site_infos", _no_work)  # the check comes first
    with pytest.raises(ConfigError) as exc:
        fit(GOOD, engine=engine, **options)
    assert message in str(exc.value)


def _no_work(*args, **kwargs):
    raise AssertionError("fit started working before checking its options")


def test_fit_refuses_a_negative_seed():
    with pytest.raises(ConfigError, match="seed = -1"):
        fit(GOOD, engine="exact", seed=-1)


def test_help_lists_the_entry_points_and_all_resolves():
    text = pydoc.render_doc(bayescrl, renderer=pydoc.plaintext)
    for name in ("from_spec", "fit", "get_algorithm", "predict", "save", "load", "ConfigError"):
        assert name in text
    for name in bayescrl.__all__:
        assert getattr(bayescrl, name) is not None
    assert bayescrl.fit is fit and bayescrl.from_spec is from_spec
    with pytest.raises(AttributeError):
        bayescrl.no_such_thing  # noqa: B018


def test_import_bayescrl_stays_light():
    heavy = "('torch', 'pyro', 'numpy', 'gymnasium')"
    code = f"import sys, bayescrl; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
