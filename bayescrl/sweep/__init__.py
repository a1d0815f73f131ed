"""``bayescrl sweep`` and ``bayescrl report``: grids of runs of any training/experiment command.

A sweep file names a command (``train``, ``bandit``, ``pspl``, ``mopo``), a grid (algorithms x envs x
seeds, and any other option of the command), the command's fixed options and an override grid (``--set``
values). Every grid point is one run of the command, in its own process, with its own seed: the command's
library call through the ``sweep_adapter`` its module exports, writing ``DIR/<run-id>/`` exactly as the
command line listed for that run does alone. Runs go to Ray (a local instance, or a cluster with
``--address``) or, without Ray, to a local pool of processes; a killed sweep resumes from the runs'
checkpoints. ``bayescrl report DIR`` tabulates mean ± sd over seeds (the thesis' protocol: "the mean and
standard deviation ... over 5 runs", e.g. Table `rewards_costs_comparison`) beside the thesis' numbers
and plots learning curves. See docs/sweep.md.
"""

from bayescrl.sweep.spec import SweepSpec, load_sweep

__all__ = ["SweepSpec", "load_sweep"]
