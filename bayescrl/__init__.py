"""bayescrl: Bayesian constrained and preference-based reinforcement learning.

Every belief is a Pyro generative model (:mod:`bayescrl.models`); inference engines
(:mod:`bayescrl.inference`) turn data into posterior samples consumed by Thompson / top-two
samplers and by the constrained optimisers (ACPO, e-COP, MOPO).

``bayescrl.load(run_dir)`` returns the policy of a constrained-RL run (``bayescrl train``) with
``predict(obs, deterministic=True)``.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """Lazy exports (``import bayescrl`` stays fast): ``bayescrl.load(run_dir)`` -> a trained policy."""
    if name == "load":
        from bayescrl.constrained.policy import load

        return load
    raise AttributeError(f"module 'bayescrl' has no attribute {name!r}")


__all__ = ["__version__", "load"]
