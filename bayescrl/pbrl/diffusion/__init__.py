"""PSPL and DPS for diffusion-model fine-tuning from trajectory preferences (appendix `pickapic`), scaled
down to a class-conditional pixel DDPM on scikit-learn's 8×8 digits (upsampled to 16×16).

Modules: :mod:`~bayescrl.pbrl.diffusion.base` (digits, ``diffusers`` UNet + scheduler, scorer classifier,
training and cache), :mod:`~bayescrl.pbrl.diffusion.mdp` (denoising MDP, rollouts, trajectory embedding),
:mod:`~bayescrl.pbrl.diffusion.policy` (2-layer 512-GELU Gaussian noise policy and its updates),
:mod:`~bayescrl.pbrl.diffusion.agents` (PSPL / DPS posteriors over θ, Dirichlet noise-norm model),
:mod:`~bayescrl.pbrl.diffusion.experiment` (config, runner, outputs). Needs the ``diffusion`` extra
(``pip install 'bayescrl[diffusion]'``: diffusers, scikit-learn); importing this package without it is
fine, the runner raises a one-line error naming the extra.
"""

from __future__ import annotations

from bayescrl.utils.errors import ConfigError


def require() -> None:
    """Raise a one-line :class:`ConfigError` naming the extra when diffusers / scikit-learn are missing."""
    missing = []
    for mod, pkg in (("diffusers", "diffusers"), ("sklearn", "scikit-learn")):
        try:
            __import__(mod)
        except ImportError:
            missing.append(pkg)
    if missing:
        raise ConfigError(
            "task", "diffusion", f"needs {', '.join(missing)}: pip install 'bayescrl[diffusion]'"
        )
