"""Imported by the sweep's fork server (:mod:`bayescrl.sweep.warm`): the heavy imports, done once."""

import os

for _key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # as for a run's own process; before torch loads
    os.environ.setdefault(_key, "1")

from bayescrl.sweep.warm import preload  # noqa: E402

preload()
