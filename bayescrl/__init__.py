"""bayescrl: Bayesian constrained and preference-based reinforcement learning.

Every belief is a Pyro generative model (:mod:`bayescrl.models`); inference engines
(:mod:`bayescrl.inference`) turn data into posterior samples consumed by Thompson / top-two
samplers and by the constrained optimisers (ACPO, e-COP, MOPO).

Main entry points (``import bayescrl`` is light: each is imported on first use)::

    model = bayescrl.from_spec("data.yaml")           # YAML/JSON spec or mapping -> SpecModel (strict keys)
    post = bayescrl.fit(model, engine="laplace")      # exact | laplace | bootstrap | svi | nuts -> Posterior
    draws = post.sample(1000)                         # {site: tensor}; post.to_arviz() for diagnostics
    data = bayescrl.simulate(spec, num_prefs=200)     # a spec with synthetic preferences (standard model)

    Algo = bayescrl.get_algorithm("ecop")             # ecop, acpo, ppo-lag, cpo, pcpo, focops, p3o, ipo, ...
    agent = Algo("bayescrl/PointCircle-v0", cost_limits=[10.0], seed=0, config={"n_envs": 4})
    agent.learn(100_000, out_dir="runs/ecop")         # metrics.jsonl + checkpoint.pt every iteration
    action, _ = agent.predict(obs, deterministic=True, step=h)   # Stable-Baselines3 style
    agent.save("ecop.pt"); agent = Algo.load("ecop.pt")          # OnPolicyAlgorithm.load: any algorithm

    policy = bayescrl.load("runs/ecop")               # a run's policy alone: policy.predict(obs) -> action

User mistakes raise :class:`ConfigError` / :class:`DataError` (field, value, reason). The families live in
sub-packages: :mod:`bayescrl.bandits` (warmPref-PS), :mod:`bayescrl.pbrl` (PSPL),
:mod:`bayescrl.constrained` (e-COP, ACPO and baselines), :mod:`bayescrl.envs` (safe-control tasks),
:mod:`bayescrl.prefrl` (posteriors from rater preferences driving constrained optimisers),
:mod:`bayescrl.mopo` (MOPO) and :mod:`bayescrl.sweep` (grids of runs); the command line is ``bayescrl``.
"""

from importlib import import_module

__version__ = "0.1.0"

#: lazily exported name -> "module:attribute"
_LAZY = {
    "BayesCRLError": "bayescrl.utils.errors:BayesCRLError",
    "ConfigError": "bayescrl.utils.errors:ConfigError",
    "DataError": "bayescrl.utils.errors:DataError",
    "load": "bayescrl.constrained.policy:load",
    "TrainedPolicy": "bayescrl.constrained.policy:TrainedPolicy",
    "from_spec": "bayescrl.models.spec:from_spec",
    "SpecModel": "bayescrl.models.spec:SpecModel",
    "simulate": "bayescrl.models.simulate:simulate",
    "fit": "bayescrl.inference.engines:fit",
    "Posterior": "bayescrl.inference.posterior:Posterior",
    "get_algorithm": "bayescrl.constrained.registry:get_algorithm",
    "OnPolicyAlgorithm": "bayescrl.constrained.core.base:OnPolicyAlgorithm",
    "TrainConfig": "bayescrl.constrained.core.config:TrainConfig",
}


def __getattr__(name: str):
    """Lazy exports (``import bayescrl`` stays fast: torch, Pyro and gymnasium load on first use)."""
    if name in _LAZY:
        module, _, attr = _LAZY[name].partition(":")
        value = getattr(import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bayescrl' has no attribute {name!r}")


__all__ = ["__version__", *_LAZY]
