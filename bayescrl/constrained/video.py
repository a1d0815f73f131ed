"""Record episodes of a trained policy as a video (``bayescrl evaluate RUN_DIR --video out.mp4``).

The env of the run is rebuilt with ``render_mode="rgb_array"`` and driven by
``bayescrl.load(run_dir).predict``; every frame (the reset frame, then one per step) goes to an
:mod:`imageio` writer: ``.mp4`` needs ``imageio-ffmpeg`` (``pip install 'bayescrl[video]'``), ``.gif`` only
Pillow. MuJoCo envs (the safe-control suite) render through OpenGL: on a machine without a display set
``MUJOCO_GL=egl`` (GPU or Mesa EGL) or ``MUJOCO_GL=osmesa`` (software; Debian package ``libosmesa6``)
before the process imports MuJoCo; :func:`default_gl_backend` sets ``egl`` when neither ``MUJOCO_GL`` nor
``DISPLAY`` is set.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from bayescrl.constrained.core.envs import resolve_env_factory
from bayescrl.constrained.policy import load
from bayescrl.utils.checks import prepare_out_file
from bayescrl.utils.errors import ConfigError, DataError

log = logging.getLogger(__name__)
VIDEO_SUFFIXES = (".mp4", ".gif", ".webm", ".mkv", ".avi")
GL_HINT = "MuJoCo needs an OpenGL backend: set MUJOCO_GL=egl (or MUJOCO_GL=osmesa with libosmesa6)"


def default_gl_backend() -> None:
    """Headless default for MuJoCo rendering (must run before ``import mujoco``): ``MUJOCO_GL=egl``."""
    if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
        os.environ["MUJOCO_GL"] = "egl"


def check_video_path(path: str | Path) -> Path:
    """Refuse an unknown suffix or an mp4 without ffmpeg before any work."""
    path = Path(path)
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise ConfigError("--video", str(path), f"must end in one of {', '.join(VIDEO_SUFFIXES)}")
    if path.exists() and path.is_dir():
        raise ConfigError("--video", str(path), "is a folder; give a file name such as out.mp4")
    prepare_out_file(path, "--video")  # a file above it, a read-only folder or file: refused before work
    try:
        import imageio  # noqa: F401
    except ImportError:
        raise ConfigError("--video", str(path), "needs imageio: pip install 'bayescrl[video]'") from None
    if path.suffix.lower() != ".gif":
        try:
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            raise ConfigError(
                "--video", str(path), "needs imageio-ffmpeg for video files: pip install 'bayescrl[video]'"
            ) from None
    return path


def _check_frame(frame, path: Path, env_id) -> np.ndarray:
    arr = np.asarray(frame) if frame is not None else None
    if arr is None or arr.ndim != 3 or arr.shape[-1] not in (3, 4) or arr.size == 0:
        shape = None if arr is None else list(arr.shape)
        raise DataError("--video", str(path), f"env {env_id} rendered {shape}, not an H x W x 3 image")
    if arr.dtype != np.uint8:
        arr = np.clip(arr, 0, 255).astype(np.uint8)
    return arr[..., :3]


def _rendering_env(env_id, env_kwargs: dict | None, path: Path):
    """The run's env rebuilt with ``render_mode="rgb_array"``; an env that cannot render is refused."""
    kwargs = {**(env_kwargs or {}), "render_mode": "rgb_array"}
    try:
        env = resolve_env_factory(env_id, kwargs)()
    except TypeError as exc:
        if "render_mode" not in str(exc):
            raise
        raise ConfigError(
            "--video", str(path), f"env {env_id} does not render (no render_mode argument)"
        ) from None
    if getattr(env, "render_mode", None) != "rgb_array":
        env.close()
        raise ConfigError("--video", str(path), f"env {env_id} does not render rgb_array frames")
    return env


def _first_frame(env, path: Path, env_id) -> np.ndarray:
    """The frame after ``reset``; a renderer failure (no OpenGL context, ...) names the GL backends."""
    try:
        first = env.render()
    except Exception as exc:  # no OpenGL context, missing libraries, ...
        why = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
        raise DataError("--video", str(path), f"rendering failed ({why}); {GL_HINT}") from None
    return _check_frame(first, path, env_id)


def _play_episode(env, obs, policy, deterministic: bool, writer, path: Path, env_id) -> tuple[float, int]:
    """Drive ``env`` from ``obs`` with ``policy.predict`` to the episode's end (at most ``100 H`` steps),
    writing one frame per step; returns ``(return, steps)``."""
    done, ret, h = False, 0.0, 0
    while not done:
        step = h if policy.time_feature else None
        action = policy.predict(obs, deterministic=deterministic, step=step)
        obs, r, term, trunc, _ = env.step(action)
        ret += float(r)
        h += 1
        writer.append_data(_check_frame(env.render(), path, env_id))
        done = term or trunc or h >= 100 * policy.horizon
    return ret, h


def record_video(
    run_dir: str | Path,
    path: str | Path,
    episodes: int = 1,
    seed: int | None = None,
    deterministic: bool = True,
    fps: int | None = None,
    device: str = "cpu",
) -> dict:
    """Play ``episodes`` episodes of the run's policy on seeds ``seed + j`` (default: training seed +
    10000, as ``evaluate``) and write them, one after the other, to ``path``. Returns
    ``{"path", "frames", "episodes", "returns", "lengths", "fps"}``."""
    import imageio.v2 as imageio

    path = check_video_path(path)
    if not isinstance(episodes, int) or episodes < 1:
        raise ConfigError("--video-episodes", episodes, "must be an integer >= 1")
    policy = load(run_dir, device=device)
    env_id = policy.info["env"]
    env = _rendering_env(env_id, policy.info.get("env_kwargs"), path)
    fps = int(fps or (env.metadata or {}).get("render_fps") or 30)
    base = int(policy.info.get("seed", 0)) + 10_000 if seed is None else int(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    frames, returns, lengths = 0, [], []
    writer = None
    try:
        for j in range(episodes):
            obs, _ = env.reset(seed=base + j)
            frame = _first_frame(env, path, env_id)
            if writer is None:
                kw = {"fps": fps} if path.suffix.lower() != ".gif" else {"duration": 1000 / fps, "loop": 0}
                writer = imageio.get_writer(str(path), **kw)
            writer.append_data(frame)
            ret, h = _play_episode(env, obs, policy, deterministic, writer, path, env_id)
            frames += 1 + h
            returns.append(ret)
            lengths.append(h)
            log.info("video episode %d: return %.2f over %d steps", j, ret, h)
    finally:
        if writer is not None:
            writer.close()
        env.close()
    return {
        "path": str(path),
        "frames": frames,
        "episodes": episodes,
        "returns": returns,
        "lengths": lengths,
        "fps": fps,
    }
