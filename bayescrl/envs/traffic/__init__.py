"""Traffic tasks on SUMO (``pip install 'bayescrl[traffic]'``): Grid and Bottleneck, after Flow's benchmarks.

Modules are imported lazily by gymnasium's entry points, so ``import bayescrl.envs`` works without SUMO;
``gym.make("bayescrl/Grid-v0")`` then raises one ``ConfigError`` naming the ``traffic`` extra.
"""
