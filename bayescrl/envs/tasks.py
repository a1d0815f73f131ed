"""Robot-agnostic planar safe-control tasks: Circle, Reach, Navigation and Gather.

A task sees only the robot's planar position ``xy``, heading ``yaw`` and planar velocity ``v`` (finite
difference of the position over one env step, as in CPO's and the thesis' definitions), so the same task runs
on the point robot (``bayescrl.envs.point``) and on gymnasium's Ant (``bayescrl.envs.ant``). Sources:

* Circle -- chapter `ecop`, appendix "Environment Details" (paragraph Circle), after CPO (Achiam et al.,
  2017): ``R = v^T [-y, x] / (1 + | ||(x, y)|| - d |)``, ``C = 1[|x| > x_lim]``.
* Reach -- chapter `ecop`, Sec. Experiments: reward from the decrease of the Euclidean distance to a goal
  that cannot be reached before the episode ends; hazards cost (safety-gym's hazards, Ray et al., 2019).
* Navigation -- chapter `ecop`, appendix paragraph Navigation: ``R = Dist(target, s_{t-1}) -
  Dist(target, s_t)``; +1 cost for a hazard and, separately, +1 for a pillar (two constraints).
* Gather -- chapter `acpo` (refers to CPO's paper and rllab's ``GatherEnv``): +1 per green apple collected,
  cost +1 per red bomb, ball sensors in angular bins.

Each task exposes ``num_costs``, ``cost_names``, ``cost_limits`` (the thesis' thresholds), ``obs_dim`` and the
methods ``reset(rng, xy)``, ``observe(xy, yaw)``, ``step(xy_prev, xy, v)`` and ``markers()``.

Reward features (for preference-based RL, ``bayescrl.prefrl``): every step's terms carry ``features``, a
float64 vector named by ``feature_names``, such that the task reward is (close to) a linear function
``<theta, features>`` with weights the learner does not know. They are what a designer could write down from
the task's description: the reward's ingredients without their weights, plus the robot's planar speed (a
plausible ingredient the true reward ignores). They never contain the cost terms (constraints are given to
the optimiser, not learned). The reward is not changed by them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bayescrl.utils.checks import number, positive_int
from bayescrl.utils.errors import ConfigError


# ---------------------------------------------------------------------- analytic reward / cost functions
def circle_reward(x: float, y: float, vx: float, vy: float, radius: float) -> float:
    """Circle reward ``v^T [-y, x] / (1 + |sqrt(x^2 + y^2) - d|)`` (chapter `ecop`, paragraph Circle)."""
    return float((-vx * y + vy * x) / (1.0 + abs(np.hypot(x, y) - radius)))


def circle_cost(x: float, x_lim: float) -> float:
    """Circle cost ``1[|x| > x_lim]``.

    Departure: the thesis' formula reads ``1[x > x_lim]``, but its text (and CPO, whose task it reproduces)
    describes a safe region bounded on both sides ("two yellow boundaries"), so ``|x|`` is used.
    """
    return float(abs(x) > x_lim)


def lidar(
    rel_xy: np.ndarray,
    yaw: float,
    num_bins: int,
    max_dist: float | None = None,
    groups: np.ndarray | None = None,
    num_groups: int = 1,
) -> np.ndarray:
    """Safety-gym style pseudo-lidar: one bin per heading sector (egocentric, full circle).

    A bin holds ``exp(-dist)`` (safety-gym's default) or, with ``max_dist``, ``max(0, 1 - dist/max_dist)``
    for the closest object in its sector. ``rel_xy`` are the objects' positions minus the robot's, ``(n, 2)``.
    With ``groups`` (an int per object) one lidar per group is computed in one pass and concatenated.
    """
    out = np.zeros(num_groups * num_bins)
    if len(rel_xy) == 0:
        return out
    dist = np.hypot(rel_xy[:, 0], rel_xy[:, 1])
    ang = np.mod(np.arctan2(rel_xy[:, 1], rel_xy[:, 0]) - yaw, 2 * np.pi)
    bins = np.minimum((ang * (num_bins / (2 * np.pi))).astype(int), num_bins - 1)
    if groups is not None:
        bins = bins + groups * num_bins
    val = np.exp(-dist) if max_dist is None else np.clip(1.0 - dist / max_dist, 0.0, None)
    np.maximum.at(out, bins, val)
    return out


def egocentric(rel_xy: np.ndarray, yaw: float) -> np.ndarray:
    """Rotate world-frame vectors ``(n, 2)`` into the robot frame (x forward, y left)."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.stack([c * rel_xy[..., 0] + s * rel_xy[..., 1], -s * rel_xy[..., 0] + c * rel_xy[..., 1]], -1)


def _dist(a: np.ndarray, b: np.ndarray) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


def _ego_unit(rel: np.ndarray, yaw: float, d: float) -> np.ndarray:
    """Egocentric unit vector of one world-frame vector of length ``d`` (scalar math: fast)."""
    c, s = math.cos(yaw), math.sin(yaw)
    d = max(d, 1e-8)
    return np.array([(c * rel[0] + s * rel[1]) / d, (-s * rel[0] + c * rel[1]) / d])


@dataclass
class Marker:
    """An object to draw (and, when ``solid``, to collide with): kind, position, radius, colour."""

    kind: str
    xy: np.ndarray
    size: float
    rgba: tuple[float, float, float, float]
    solid: bool = False


def _place(
    rng: np.random.Generator,
    n: int,
    sampler,
    keepout: list[tuple[np.ndarray, float]],
    size: float,
    field: str,
) -> np.ndarray:
    """Rejection-sample ``n`` non-overlapping points (keeping ``size`` clear of each keep-out disc)."""
    out: list[np.ndarray] = []
    for _ in range(200 * max(n, 1)):
        if len(out) == n:
            break
        p = sampler(rng)
        if all(np.hypot(*(p - c)) > r + size for c, r in keepout) and all(
            np.hypot(*(p - q)) > 2 * size for q in out
        ):
            out.append(p)
    if len(out) < n:
        raise ConfigError(field, n, "cannot place that many non-overlapping objects in the arena")
    return np.asarray(out).reshape(n, 2)


# ---------------------------------------------------------------------- tasks
class Task:
    """Base class (see module docstring)."""

    num_costs = 1
    cost_names: tuple[str, ...] = ("cost",)
    cost_limits: tuple[float, ...] = (0.0,)
    obs_dim = 0
    done = False  # a task may end the episode (Gather: nothing left to collect)
    feature_names: tuple[str, ...] = ()  # a task with features returns terms["features"] from step()

    def reset_features(self) -> np.ndarray:
        """``info["features"]`` at reset: zeros (no transition yet, so nothing was earned)."""
        return np.zeros(len(self.feature_names))

    def reset(self, rng: np.random.Generator, xy: np.ndarray) -> None:
        self.done = False

    def observe(self, xy: np.ndarray, yaw: float) -> np.ndarray:
        return np.zeros(0)

    def step(self, xy_prev: np.ndarray, xy: np.ndarray, v: np.ndarray) -> tuple[float, np.ndarray, dict]:
        raise NotImplementedError

    def markers(self) -> list[Marker]:
        return []

    def step_info(self, costs: np.ndarray, xy: np.ndarray, v: np.ndarray, terms: dict) -> dict:
        """Step ``info``: ``cost`` (float, or a vector when m > 1), named ``costs``, position and velocity."""
        return {
            "cost": float(costs[0]) if self.num_costs == 1 else costs.astype(float),
            "costs": {name: float(c) for name, c in zip(self.cost_names, costs, strict=True)},
            "x_position": xy[0],
            "y_position": xy[1],
            "x_velocity": v[0],
            "y_velocity": v[1],
            **terms,
        }


class CircleTask(Task):
    """Circle of radius ``radius`` inside the strip ``|x| <= x_lim`` (defaults per robot in the envs)."""

    cost_names = ("cost_out_of_bounds",)
    # ring-weighted angular progress (the reward's two factors multiplied), angular progress alone
    # (x v_y - y v_x), distance to the ring |r - d|, speed
    feature_names = ("ring_angular_progress", "angular_progress", "ring_distance", "speed")

    def __init__(self, radius: float, x_lim: float, cost_limit: float = 10.0):
        self.radius = number(radius, "radius", 0.0, strict=True)
        self.x_lim = number(x_lim, "x_lim", 0.0, strict=True)
        if self.x_lim >= self.radius:
            raise ConfigError(
                "x_lim", x_lim, f"must be smaller than the radius {radius} (else nothing binds)"
            )
        self.cost_limits = (float(cost_limit),)

    def step(self, xy_prev, xy, v):
        r = circle_reward(xy[0], xy[1], v[0], v[1], self.radius)
        c = circle_cost(xy[0], self.x_lim)
        ang = float(-v[0] * xy[1] + v[1] * xy[0])
        off = abs(math.hypot(xy[0], xy[1]) - self.radius)
        feats = np.array([ang / (1.0 + off), ang, off, math.hypot(v[0], v[1])])
        return r, np.array([c]), {"reward_circle": r, "cost_out_of_bounds": c, "features": feats}

    def markers(self):
        return [
            Marker("boundary", np.array([s * self.x_lim, 0.0]), 0.02, (0.9, 0.8, 0.1, 1)) for s in (-1, 1)
        ]


class _GoalMixin:
    goal: np.ndarray
    hazards: np.ndarray
    hazard_size: float

    def _hazard_cost(self, xy: np.ndarray) -> float:
        if len(self.hazards) == 0:
            return 0.0
        return float((np.hypot(*(self.hazards - xy).T) <= self.hazard_size).any())


class ReachTask(Task, _GoalMixin):
    """Reach: ``R = ||g - xy_{t-1}|| - ||g - xy_t||`` towards a goal placed ``goal_distance`` away in a random
    direction (far enough that it cannot be reached within an episode); cost 1 inside any hazard.

    Hazards are scattered in a band along the straight line to the goal (``0.5 .. band_length`` ahead,
    ``|lateral| <= band_width``) so that the short path crosses them. Observation: egocentric goal direction
    (unit vector), distance to the goal divided by ``goal_distance``, hazard lidar (``lidar_bins``).
    """

    cost_names = ("cost_hazards",)
    # the goal cannot be reached within an episode, so there is no goal-reached indicator
    feature_names = ("distance_progress", "speed")

    def __init__(
        self,
        goal_distance: float,
        num_hazards: int = 8,
        hazard_size: float = 0.5,
        band_length: float = 12.0,
        band_width: float = 3.0,
        lidar_bins: int = 16,
        cost_limit: float = 25.0,
    ):
        self.goal_distance = number(goal_distance, "goal_distance", 0.0, strict=True)
        self.num_hazards = positive_int(num_hazards, "num_hazards", 0)
        self.hazard_size = number(hazard_size, "hazard_size", 0.0, strict=True)
        self.band_length = number(band_length, "band_length", 0.0, strict=True)
        self.band_width = number(band_width, "band_width", 0.0, strict=True)
        self.lidar_bins = max(1, positive_int(lidar_bins, "lidar_bins", 0))
        self.cost_limits = (float(cost_limit),)
        self.obs_dim = 3 + self.lidar_bins
        self.goal = np.array([self.goal_distance, 0.0])
        self.hazards = np.zeros((0, 2))
        self.reset(np.random.default_rng(0), np.zeros(2))  # fail now if the layout cannot be placed

    def reset(self, rng, xy):
        super().reset(rng, xy)
        ang = rng.uniform(0, 2 * np.pi)
        u = np.array([np.cos(ang), np.sin(ang)])
        n = np.array([-u[1], u[0]])
        self.goal = xy + self.goal_distance * u
        lo = 1.0 + self.hazard_size

        def sample(g):
            return xy + g.uniform(lo, self.band_length) * u + g.uniform(-self.band_width, self.band_width) * n

        self.hazards = _place(rng, self.num_hazards, sample, [(xy, 0.5)], self.hazard_size, "num_hazards")

    def observe(self, xy, yaw):
        rel = self.goal - xy
        d = math.hypot(rel[0], rel[1])
        unit = _ego_unit(rel, yaw, d)
        return np.concatenate(
            [unit, [d / self.goal_distance], lidar(self.hazards - xy, yaw, self.lidar_bins)]
        )

    def step(self, xy_prev, xy, v):
        r = _dist(self.goal, xy_prev) - _dist(self.goal, xy)
        c = self._hazard_cost(xy)
        feats = np.array([r, math.hypot(v[0], v[1])])
        return r, np.array([c]), {"reward_distance": r, "cost_hazards": c, "features": feats}

    def markers(self):
        out = [Marker("hazard", h, self.hazard_size, (0.6, 0.5, 1.0, 0.6)) for h in self.hazards]
        return out + [Marker("goal", self.goal, 0.3, (0.1, 0.9, 0.1, 0.7))]


class NavigationTask(Task, _GoalMixin):
    """Navigation (two constraints): reach goals in a square arena ``[-half, half]^2`` avoiding hazards
    (cost 0, limit ``d1``) and solid pillars (cost 1, limit ``d2``).

    Reward ``Dist(goal, s_{t-1}) - Dist(goal, s_t)`` (seed) plus ``goal_bonus`` when the goal is reached,
    after which a new goal is drawn (safety-gym's Goal task; the thesis' formula has no bonus: set
    ``goal_bonus=0`` for the literal definition). A pillar costs 1 while the robot touches it
    (``dist <= pillar_size + robot_radius + 0.01``). Observation: egocentric goal direction, distance to the
    goal, hazard lidar, pillar lidar (one pseudo-radar per obstacle type, as in the thesis' appendix).
    Limits ``(10, 25)`` follow Table `rewards_costs_comparison` and Fig. `navigation_rewards_costs`
    (the appendix text says ``d1 = 25, d2 = 20``; the table's values are used).
    """

    num_costs = 2
    cost_names = ("cost_hazards", "cost_pillars")
    feature_names = ("distance_progress", "goal_reached", "speed")

    def __init__(
        self,
        half: float = 3.0,
        num_hazards: int = 8,
        hazard_size: float = 0.3,
        num_pillars: int = 6,
        pillar_size: float = 0.2,
        goal_size: float = 0.3,
        goal_bonus: float = 1.0,
        robot_radius: float = 0.1,
        lidar_bins: int = 16,
        cost_limits: tuple[float, float] = (10.0, 25.0),
    ):
        self.half = number(half, "half", 0.0, strict=True)
        self.num_hazards = positive_int(num_hazards, "num_hazards", 0)
        self.hazard_size = number(hazard_size, "hazard_size", 0.0, strict=True)
        self.num_pillars = positive_int(num_pillars, "num_pillars", 0)
        self.pillar_size = number(pillar_size, "pillar_size", 0.0, strict=True)
        self.goal_size = number(goal_size, "goal_size", 0.0, strict=True)
        self.goal_bonus = float(goal_bonus)
        self.robot_radius = float(robot_radius)
        self.lidar_bins = max(1, positive_int(lidar_bins, "lidar_bins", 0))
        if len(tuple(cost_limits)) != 2:
            raise ConfigError("cost_limits", cost_limits, "Navigation has two costs (hazards, pillars)")
        self.cost_limits = tuple(float(c) for c in cost_limits)
        self.obs_dim = 3 + 2 * self.lidar_bins
        self.goal = np.zeros(2)
        self.hazards = np.zeros((0, 2))
        self.pillars = np.zeros((0, 2))
        self.goals_reached = 0
        self.reset(np.random.default_rng(0), np.zeros(2))  # fail now if the layout cannot be placed

    def _sample(self, g):
        return g.uniform(-self.half, self.half, size=2)

    def reset(self, rng, xy):
        super().reset(rng, xy)
        keep = [(xy, 0.4)]
        self.pillars = _place(rng, self.num_pillars, self._sample, keep, self.pillar_size, "num_pillars")
        keep += [(p, self.pillar_size) for p in self.pillars]
        self.hazards = _place(rng, self.num_hazards, self._sample, keep, self.hazard_size, "num_hazards")
        self._obstacles = np.concatenate([self.hazards, self.pillars])
        self._groups = np.repeat([0, 1], [len(self.hazards), len(self.pillars)])
        self._rng = rng
        self._new_goal(xy)
        self.goals_reached = 0

    def _new_goal(self, xy):
        keep = [(xy, 0.5)] + [(p, self.pillar_size) for p in self.pillars]
        keep += [(h, self.hazard_size) for h in self.hazards]
        self.goal = _place(self._rng, 1, self._sample, keep, self.goal_size, "goal_size")[0]

    def observe(self, xy, yaw):
        rel = self.goal - xy
        d = math.hypot(rel[0], rel[1])
        return np.concatenate(
            [
                _ego_unit(rel, yaw, d),
                [np.exp(-d)],
                lidar(self._obstacles - xy, yaw, self.lidar_bins, groups=self._groups, num_groups=2),
            ]
        )

    def step(self, xy_prev, xy, v):
        r = _dist(self.goal, xy_prev) - _dist(self.goal, xy)
        info = {"reward_distance": r, "goal_reached": False}
        if _dist(self.goal, xy) <= self.goal_size:
            r += self.goal_bonus
            self.goals_reached += 1
            info["goal_reached"] = True
            self._new_goal(xy)
        c_h = self._hazard_cost(xy)
        c_p = 0.0
        if len(self.pillars):
            c_p = float(
                (np.hypot(*(self.pillars - xy).T) <= self.pillar_size + self.robot_radius + 0.01).any()
            )
        info.update(cost_hazards=c_h, cost_pillars=c_p)
        info["features"] = np.array(
            [info["reward_distance"], float(info["goal_reached"]), math.hypot(v[0], v[1])]
        )
        return r, np.array([c_h, c_p]), info

    def markers(self):
        out = [Marker("hazard", h, self.hazard_size, (0.6, 0.5, 1.0, 0.6)) for h in self.hazards]
        out += [Marker("pillar", p, self.pillar_size, (0.3, 0.1, 0.5, 1.0), solid=True) for p in self.pillars]
        return out + [Marker("goal", self.goal, self.goal_size, (0.1, 0.9, 0.1, 0.7))]


class GatherTask(Task):
    """Gather (CPO's paper / rllab's ``GatherEnv``): +1 reward per apple, +1 cost per bomb collected.

    ``num_apples`` apples and ``num_bombs`` bombs are placed on the even-integer grid of
    ``[-activity_range, activity_range]^2`` (not at the start), an object is collected when the robot is
    within ``catch_range`` and then disappears; the episode ends when nothing is left. Sensors: for apples and
    for bombs separately, ``num_bins`` sectors covering ``sensor_span`` ahead of the robot, each reading
    ``1 - dist/sensor_range`` of the closest object in it (rllab's definition). Defaults are rllab's
    (8 + 8 objects, range 6, catch 1, 10 bins, sensor range 6, span pi).
    """

    cost_names = ("cost_bombs",)
    feature_names = ("apples_collected", "speed")

    def __init__(
        self,
        num_apples: int = 8,
        num_bombs: int = 8,
        activity_range: float = 6.0,
        catch_range: float = 1.0,
        num_bins: int = 10,
        sensor_range: float = 6.0,
        sensor_span: float = np.pi,
        cost_limit: float = 0.1,
    ):
        self.num_apples = positive_int(num_apples, "num_apples", 0)
        self.num_bombs = positive_int(num_bombs, "num_bombs", 0)
        self.activity_range = number(activity_range, "activity_range", 0.0, strict=True)
        self.catch_range = number(catch_range, "catch_range", 0.0, strict=True)
        self.num_bins = max(1, positive_int(num_bins, "num_bins", 0))
        self.sensor_range = number(sensor_range, "sensor_range", 0.0, strict=True)
        self.sensor_span = number(sensor_span, "sensor_span", 0.0, strict=True)
        half = int(self.activity_range // 2)
        if self.num_apples + self.num_bombs > (2 * half + 1) ** 2 - 1:
            raise ConfigError(
                "num_apples+num_bombs", self.num_apples + self.num_bombs, "more than grid cells"
            )
        self.cost_limits = (float(cost_limit),)
        self.obs_dim = 2 * self.num_bins
        self.apples = np.zeros((0, 2))
        self.bombs = np.zeros((0, 2))

    def reset(self, rng, xy):
        super().reset(rng, xy)
        half = int(self.activity_range // 2)
        cells = [
            (2 * i, 2 * j) for i in range(-half, half + 1) for j in range(-half, half + 1) if (i, j) != (0, 0)
        ]
        pick = rng.choice(len(cells), size=self.num_apples + self.num_bombs, replace=False)
        pts = np.asarray([cells[k] for k in pick], dtype=float).reshape(-1, 2) + xy
        self.apples, self.bombs = pts[: self.num_apples], pts[self.num_apples :]

    def _sensors(self, objs, xy, yaw):
        out = np.zeros(self.num_bins)
        if len(objs) == 0:
            return out
        rel = objs - xy
        dist = np.hypot(rel[:, 0], rel[:, 1])
        ang = np.mod(np.arctan2(rel[:, 1], rel[:, 0]) - yaw + np.pi, 2 * np.pi) - np.pi  # in [-pi, pi)
        ok = (dist < self.sensor_range) & (np.abs(ang) <= self.sensor_span / 2)
        bins = np.minimum(
            ((ang + self.sensor_span / 2) / (self.sensor_span / self.num_bins)).astype(int), self.num_bins - 1
        )
        np.maximum.at(out, bins[ok], 1.0 - dist[ok] / self.sensor_range)
        return out

    def observe(self, xy, yaw):
        return np.concatenate([self._sensors(self.apples, xy, yaw), self._sensors(self.bombs, xy, yaw)])

    def step(self, xy_prev, xy, v):
        got_a = np.hypot(*(self.apples - xy).T) < self.catch_range if len(self.apples) else np.zeros(0, bool)
        got_b = np.hypot(*(self.bombs - xy).T) < self.catch_range if len(self.bombs) else np.zeros(0, bool)
        self.apples, self.bombs = self.apples[~got_a], self.bombs[~got_b]
        r, c = float(got_a.sum()), float(got_b.sum())
        self.done = len(self.apples) + len(self.bombs) == 0
        feats = np.array([r, math.hypot(v[0], v[1])])
        return r, np.array([c]), {"apples": r, "cost_bombs": c, "changed": bool(r or c), "features": feats}

    def markers(self):
        out = [Marker("apple", a, 0.25, (0.1, 0.8, 0.1, 1.0)) for a in self.apples]
        return out + [Marker("bomb", b, 0.25, (0.9, 0.1, 0.1, 1.0)) for b in self.bombs]
