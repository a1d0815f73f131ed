"""``bayescrl evaluate RUN_DIR --video FILE``: recorded frames are the episodes the policy plays."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bayescrl.cli import main

imageio = pytest.importorskip("imageio.v2")
WALK = "bayescrl.constrained.toy:PaintedWalk"
SMALL = ["--set", "config.n_envs=1", "--set", "config.rollout_steps=32", "--set", "config.update_epochs=1"]
SMALL += ["--set", "config.eval_episodes=1", "--no-progress"]


def _train(out, env=WALK, extra=()):
    main(
        ["train", "--algo", "ppo-lag", "--env", env, "--total-steps", "32", "--out", str(out), *SMALL, *extra]
    )


def _exit(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


@pytest.fixture(scope="module")
def walk_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("video") / "run"
    _train(out, extra=["--cost-limit", "1"])
    return out


@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_video_holds_every_frame_of_every_episode(walk_run, tmp_path, suffix, capsys):
    if suffix == ".mp4":
        pytest.importorskip("imageio_ffmpeg")
    video = tmp_path / f"out{suffix}"
    main(["evaluate", str(walk_run), "--episodes", "1", "--video", str(video), "--video-episodes", "2"])
    frames = [np.asarray(f)[..., :3] for f in imageio.get_reader(str(video))]
    # PaintedWalk: 6 steps per episode -> reset frame + 6 = 7 frames each; grey level 8 t (t = step index)
    assert len(frames) == 14
    grey = [int(np.median(f[:, :, 0])) for f in frames]
    assert np.allclose(grey, [8 * t for t in range(7)] * 2, atol=3)
    ev = json.loads((walk_run / "evaluation.json").read_text())
    assert ev["video"]["frames"] == 14 and ev["video"]["episodes"] == 2
    assert "14 frames" in capsys.readouterr().out


def test_video_refused_for_an_env_that_does_not_render_and_for_a_bad_suffix(tmp_path, capsys):
    run = tmp_path / "cart"
    _train(run, env="bayescrl.constrained.toy:CostCartPole", extra=["--cost-limit", "5"])
    code, cap = _exit(["evaluate", str(run), "--video", str(tmp_path / "v.mp4")], capsys)
    assert code == 2 and "does not render" in cap.err and "\n" not in cap.err.strip()
    assert not (tmp_path / "v.mp4").exists()
    code, cap = _exit(["evaluate", str(run), "--video", str(tmp_path / "v.txt")], capsys)
    assert code == 2 and "--video" in cap.err and ".mp4" in cap.err


@pytest.mark.slow
def test_mujoco_video_renders_headless_with_egl(tmp_path):
    """PointCircle through MuJoCo's OpenGL renderer (MUJOCO_GL defaults to egl without a display)."""
    pytest.importorskip("imageio_ffmpeg")
    code = f"""
import sys
from bayescrl.cli import main
run = {str(tmp_path / "run")!r}
main(["train", "--algo", "ppo-lag", "--env", "bayescrl/PointCircle-v0", "--total-steps", "32", "--out", run,
      "--set", "env_kwargs.width=64", "--set", "env_kwargs.height=64",
      "--set", "env_kwargs.max_episode_steps=20", *{SMALL!r}])
main(["evaluate", run, "--episodes", "1", "--video", {str(tmp_path / "pc.mp4")!r}])
"""
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)
    if proc.returncode != 0 and "rendering failed" in proc.stderr:
        pytest.skip(f"no OpenGL backend here: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    frames = [np.asarray(f) for f in imageio.get_reader(str(tmp_path / "pc.mp4"))]
    ev = json.loads((tmp_path / "run" / "evaluation.json").read_text())
    assert len(frames) == ev["video"]["frames"] == ev["lengths"][0] + 1
    assert frames[0].shape[:2] == (64, 64) and frames[0].std() > 1  # an image, not a blank frame
