"""Base model of the scaled-down image experiment: a class-conditional pixel DDPM and a scorer classifier.

Data: scikit-learn's 8×8 handwritten digits (1 797 images, 10 classes; ships with the dependency, so
nothing is downloaded), upsampled bilinearly to ``size``×``size`` (16 by default: strokes stay visible
and a tiny UNet runs on a CPU) and scaled to [−1, 1]. The class is the "prompt" p.

* Generator: ``diffusers.UNet2DModel`` (``num_class_embeds = 10``) trained with ``DDPMScheduler``'s
  ε-prediction loss; sampling uses ``DDIMScheduler`` (η = 0) with ``T`` steps, the frozen scheduler ρ of
  appendix `pickapic` (``z_{t+1} = f_ρ(z_t, ε_t)``).
* Scorer (in place of CLIP / ImageReward): a small CNN trained on the same data (with Gaussian pixel noise
  as augmentation); ``score(p, x) = log softmax(f(x))_p``.

:func:`load_or_train` caches both under ``cache_dir`` (``base.pt``, loaded with ``weights_only=True``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from bayescrl.utils.errors import ConfigError
from bayescrl.utils.safe_state import load_state, save_state

log = logging.getLogger(__name__)
NUM_CLASSES = 10


def digits(size: int = 16) -> tuple[Tensor, Tensor]:
    """scikit-learn digits as ``x [1797, 1, size, size]`` in [−1, 1] and labels ``y [1797]``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32, device="cpu").unsqueeze(1) / 16.0
    if size != 8:
        x = nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return x.clamp(0, 1) * 2 - 1, torch.tensor(d.target, dtype=torch.long, device="cpu")


def make_unet(size: int, channels: tuple[int, ...] = (16, 32), layers_per_block: int = 1):
    """Tiny class-conditional ``UNet2DModel`` (one channel, ``len(channels)`` resolutions)."""
    from diffusers import UNet2DModel

    n = len(channels)
    return UNet2DModel(
        sample_size=size,
        in_channels=1,
        out_channels=1,
        layers_per_block=layers_per_block,
        block_out_channels=tuple(channels),
        down_block_types=("DownBlock2D",) * n,
        up_block_types=("UpBlock2D",) * n,
        num_class_embeds=NUM_CLASSES,
        norm_num_groups=min(8, min(channels)),
    )


class Scorer(nn.Module):
    """Small CNN classifier; :meth:`score` is ``log p(class = p | x)``."""

    def __init__(self, size: int = 16, width: int = 16):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1),
            nn.GELU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Flatten(),
            nn.Linear(2 * width * ((size + 1) // 2) ** 2, NUM_CLASSES),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def score(self, p: Tensor, x: Tensor) -> Tensor:
        return torch.log_softmax(self(x), -1).gather(-1, p.unsqueeze(-1)).squeeze(-1)


@dataclass
class BaseModel:
    """Frozen generator (unet + training scheduler config) and scorer, with how they were trained."""

    unet: Any
    scorer: Scorer
    num_train_timesteps: int
    size: int
    info: dict

    def ddim(self, T: int):
        """``DDIMScheduler`` with ``T`` inference steps (η = 0); ``T`` must not exceed the training steps."""
        from diffusers import DDIMScheduler

        if T > self.num_train_timesteps:
            raise ConfigError(
                "T", T, f"larger than the scheduler's {self.num_train_timesteps} training steps"
            )
        sch = DDIMScheduler(num_train_timesteps=self.num_train_timesteps, clip_sample=True)
        sch.set_timesteps(T)
        return sch


def train_base(cfg: dict, *, seed: int = 0, device: str = "cpu", progress: bool = True) -> BaseModel:
    """Train the DDPM (``cfg.steps`` Adam steps of batch ``cfg.batch``) and the scorer on the digits."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    size = cfg["size"]
    x, y = digits(size)
    t0 = time.perf_counter()
    scorer, acc = _train_scorer(x, y, cfg["scorer_steps"], g, device)
    t_scorer = time.perf_counter() - t0
    unet, ema = _train_unet(x, y, cfg, g, device, progress)
    info = {
        "train_steps": cfg["steps"],
        "batch": cfg["batch"],
        "final_loss_ema": ema,
        "scorer_train_accuracy": acc,
        "scorer_seconds": t_scorer,
        "train_seconds": time.perf_counter() - t0,
        "unet_parameters": sum(p.numel() for p in unet.parameters()),
        "device": device,
    }
    return BaseModel(
        unet.requires_grad_(False), scorer.eval().requires_grad_(False), cfg["train_timesteps"], size, info
    )


def _train_scorer(
    x: torch.Tensor, y: torch.Tensor, steps: int, g: torch.Generator, device: str
) -> tuple[Scorer, float]:
    """The digit classifier: ``steps`` Adam steps on batches of 128 with Gaussian pixel noise (sd 0.2) as
    augmentation; returns it and its training accuracy."""
    size = x.shape[-1]
    scorer = Scorer(size).to(device)
    opt = torch.optim.Adam(scorer.parameters(), lr=2e-3)
    for _ in range(steps):
        i = torch.randint(len(x), (128,), generator=g)
        xb = x[i] + 0.2 * torch.randn(128, 1, size, size, generator=g)
        loss = nn.functional.cross_entropy(scorer(xb.to(device)), y[i].to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = float((scorer(x.to(device)).argmax(-1).cpu() == y).float().mean())
    return scorer, acc


def _train_unet(
    x: torch.Tensor, y: torch.Tensor, cfg: dict, g: torch.Generator, device: str, progress: bool
) -> tuple[nn.Module, float | None]:
    """The class-conditional DDPM: ``cfg.steps`` AdamW steps of batch ``cfg.batch`` on the noise-prediction
    loss; returns the UNet (eval mode) and the loss's exponential moving average."""
    from diffusers import DDPMScheduler

    unet = make_unet(cfg["size"], tuple(cfg["channels"]), cfg["layers_per_block"]).to(device)
    sch = DDPMScheduler(num_train_timesteps=cfg["train_timesteps"])
    opt = torch.optim.AdamW(unet.parameters(), lr=cfg["lr"])
    steps, bs = cfg["steps"], cfg["batch"]
    ema = None
    for s in range(steps):
        i = torch.randint(len(x), (bs,), generator=g)
        x0 = x[i].to(device)
        noise = torch.randn(x0.shape, generator=g).to(device)
        t = torch.randint(cfg["train_timesteps"], (bs,), generator=g).to(device)
        xt = sch.add_noise(x0, noise, t)
        loss = nn.functional.mse_loss(unet(xt, t, class_labels=y[i].to(device)).sample, noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if progress and (s + 1) % max(1, steps // 10) == 0:
            log.info("base model: step %d/%d, loss %.4f", s + 1, steps, ema)
    unet.eval()
    return unet, ema


def load_or_train(
    cfg: dict, cache_dir: str | Path, *, no_train: bool = False, device: str = "cpu", progress: bool = True
) -> BaseModel:
    """The cached base model of ``cfg`` under ``cache_dir`` (trained and saved on a miss).

    ``no_train``: a missing (or differently configured) cache is an error instead of a training run.
    """
    path = Path(cache_dir) / "base.pt"
    if path.exists():
        st = load_state(path, "base.cache")
        if st["config"] == cfg:
            unet = make_unet(cfg["size"], tuple(cfg["channels"]), cfg["layers_per_block"])
            unet.load_state_dict(st["unet"])
            scorer = Scorer(cfg["size"])
            scorer.load_state_dict(st["scorer"])
            return BaseModel(
                unet.to(device).eval().requires_grad_(False),
                scorer.to(device).eval().requires_grad_(False),
                cfg["train_timesteps"],
                cfg["size"],
                {**st["info"], "cached": True},
            )
        if no_train:
            raise ConfigError(
                "--no-train", str(path), "the cached base model was trained with another 'base' config"
            )
    elif no_train:
        raise ConfigError("--no-train", str(path), "no cached base model there; run once without --no-train")
    log.info("training the base model (cache: %s)", path)
    bm = train_base(cfg, device=device, progress=progress)
    save_state(
        {
            "config": cfg,
            "unet": {k: v.cpu() for k, v in bm.unet.state_dict().items()},
            "scorer": {k: v.cpu() for k, v in bm.scorer.state_dict().items()},
            "info": bm.info,
        },
        path,
    )
    bm.info["cached"] = False
    return bm
