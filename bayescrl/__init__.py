"""bayescrl: Bayesian constrained and preference-based reinforcement learning.

Every belief is a Pyro generative model (:mod:`bayescrl.models`); inference engines
(:mod:`bayescrl.inference`) turn data into posterior samples consumed by Thompson / top-two
samplers and by the constrained optimisers (ACPO, e-COP, MOPO).
"""

__version__ = "0.1.0"
