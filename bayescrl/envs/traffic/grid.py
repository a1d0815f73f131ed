"""Grid: traffic-light control of a grid of intersections (chapters `acpo` and `ecop`, after Flow's
``grid0`` benchmark of Vinitsky et al., 2018).

Network: sumo-rl's ``3x3grid`` (9 signalised intersections, two-lane roads of 134 m inside and 242 m at
the fringe, 13.89 m/s) by default; ``network="2x2"`` (sumo-rl's 2x2 grid, 4 lights) or any SUMO
``.net.xml`` with traffic lights. Demand: from every fringe road a flow of ``inflow`` veh/h (Flow's
``EDGE_INFLOW = 300``) going straight across the grid (as Flow's grid routes), inserted at the road's
speed limit with Bernoulli arrivals drawn by SUMO's seeded RNG.

Control (Flow's ``TrafficLightGridEnv``, continuous actions): ``a_i > 0`` asks light ``i`` to switch to
its next green phase; the switch happens when its green has lasted ``min_green`` (Flow's ``switch_time``
3 s) and goes through ``yellow`` seconds of yellow. Green phases are the light's own program's phases
without yellow.

Reward: throughput, the vehicles that leave the network during the step.
Cost (the thesis: "a light may stay red for at most 5 consecutive seconds"): for every approach (an
incoming road of a light, red when all its signals are red), the seconds by which its current red run
exceeds ``red_limit`` = 5 s, summed over approaches -- :class:`~bayescrl.envs.traffic.sim.OverTimeCounter`.
A red held for 6 s costs 1. Cycling with 3 s greens and 2 s yellows keeps every red at 5 s: cost 0.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gymnasium import spaces

from bayescrl.envs.traffic.base import SumoTaskEnv, read_net, resolve_file
from bayescrl.envs.traffic.sim import EXTRA_HINT, OverTimeCounter, cache_dir, sumo_home, write_atomic
from bayescrl.utils.checks import number
from bayescrl.utils.errors import ConfigError

MAX_APPROACHES = 4
PER_APPROACH = 4  # vehicles / capacity, halting / capacity, mean speed / limit, red run / red_limit
PER_LIGHT = MAX_APPROACHES * PER_APPROACH + 3  # + green index, yellow flag, time in phase / 10 s
_COLOURS = {"G": "#22cc22", "g": "#22cc22", "y": "#ffcc00", "Y": "#ffcc00", "r": "#dd2222", "s": "#dd2222"}


def shipped_networks() -> dict[str, Path]:
    """sumo-rl's grid networks, located without importing sumo-rl (its import takes seconds)."""
    spec = importlib.util.find_spec("sumo_rl")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("env", GridEnv.env_id, EXTRA_HINT)
    nets = Path(next(iter(spec.submodule_search_locations))) / "nets"
    return {"3x3": nets / "3x3grid" / "3x3Grid2lanes.net.xml", "2x2": nets / "2x2grid" / "2x2.net.xml"}


@dataclass
class Light:
    """One signalised intersection: its green states, the yellow between consecutive greens, approaches."""

    tls: str
    greens: list[str]
    yellows: list[str]
    approaches: list[str]  # incoming edge ids (sorted)
    links: list[list[int]]  # signal indices of each approach
    capacity: np.ndarray  # vehicles that fit on each approach (lanes x length / 7.5 m)
    speed: np.ndarray  # speed limit of each approach
    stop_xy: list[tuple[float, float]]  # where each approach meets the junction (render)

    def red(self, state: str) -> list[bool]:
        return [all(state[i] in "rs" for i in idx) for idx in self.links]


def _yellow(cur: str, nxt: str) -> str:
    return "".join("y" if c in "Gg" and n in "rs" else c for c, n in zip(cur, nxt, strict=True))


def parse_lights(net_path: str) -> list[Light]:
    net = read_net(net_path)
    lights = []
    for tl in sorted(net.getTrafficLights(), key=lambda t: t.getID()):
        progs = list(tl.getPrograms().values())
        if not progs:
            continue
        states = [p.state for p in progs[0].getPhases()]
        greens = [s for s in states if "y" not in s.lower() and any(c in "Gg" for c in s)]
        greens = list(dict.fromkeys(greens))
        if len(greens) < 2:
            continue
        by_edge: dict[str, set[int]] = {}
        for in_lane, _out, idx in tl.getConnections():
            by_edge.setdefault(in_lane.getEdge().getID(), set()).add(int(idx))
        approaches = sorted(by_edge)[:MAX_APPROACHES]
        edges = [net.getEdge(e) for e in approaches]
        lights.append(
            Light(
                tls=tl.getID(),
                greens=greens,
                yellows=[_yellow(g, greens[(k + 1) % len(greens)]) for k, g in enumerate(greens)],
                approaches=approaches,
                links=[sorted(by_edge[e]) for e in approaches],
                capacity=np.array([max(1.0, e.getLaneNumber() * e.getLength() / 7.5) for e in edges]),
                speed=np.array([e.getSpeed() for e in edges]),
                stop_xy=[tuple(e.getLanes()[0].getShape()[-1]) for e in edges],
            )
        )
    return lights


def straight_routes(net_path: str) -> list[tuple[str, str]]:
    """(fringe incoming road, fringe outgoing road straight ahead) pairs: Flow's straight grid routes."""
    net = read_net(net_path)
    tls_nodes = {n.getID() for t in net.getTrafficLights() for n in _tl_nodes(net, t)}
    fringe_in = [
        e
        for e in net.getEdges()
        if e.getFromNode().getID() not in tls_nodes and e.getToNode().getID() in tls_nodes
    ]
    fringe_out = [
        e
        for e in net.getEdges()
        if e.getToNode().getID() not in tls_nodes and e.getFromNode().getID() in tls_nodes
    ]
    pairs = []
    for e in sorted(fringe_in, key=lambda e: e.getID()):
        a, b = np.asarray(e.getFromNode().getCoord()), np.asarray(e.getToNode().getCoord())
        d = (b - a) / max(np.linalg.norm(b - a), 1e-9)
        best, score = None, -np.inf
        for o in fringe_out:
            w = np.asarray(o.getToNode().getCoord()) - a
            along, lateral = float(w @ d), abs(float(w[0] * d[1] - w[1] * d[0]))
            s = along - 10.0 * lateral
            if along > 0 and s > score:
                best, score = o, s
        if best is not None:
            pairs.append((e.getID(), best.getID()))
    return pairs


def _tl_nodes(net, tl):
    nodes = set()
    for in_lane, _out, _ in tl.getConnections():
        nodes.add(in_lane.getEdge().getToNode())
    return nodes


class GridEnv(SumoTaskEnv):
    """``bayescrl/Grid-v0`` (see the module docstring). ``S`` has 19 entries per light (``R^171`` on the
    3x3 grid, ``R^76`` on the 2x2 grid), ``A = [-1, 1]^{lights}`` (9 or 4)."""

    env_id = "bayescrl/Grid-v0"
    sim_step = 1.0
    cost_name = "cost_red_over_limit"
    time_to_teleport = -1.0

    def __init__(
        self,
        network: str = "3x3",
        inflow: float = 300.0,
        horizon: int = 200,
        warm_up: float = 60.0,
        step_seconds: float = 1.0,
        min_green: float = 3.0,
        yellow: float = 2.0,
        red_limit: float = 5.0,
        warm_up_green: float = 10.0,
        cost_limit: float = 75.0,
        backend: str = "auto",
        render_mode: str | None = None,
    ):
        sumo_home(self.env_id)
        self.inflow = number(inflow, "inflow", 0.0)
        if self.inflow > 3600.0:
            raise ConfigError("inflow", inflow, "must be <= 3600 veh/h per road (one vehicle per second)")
        self.min_green = number(min_green, "min_green", 0.0)
        self.yellow = number(yellow, "yellow", 0.0, strict=True)
        self.red_limit = number(red_limit, "red_limit", 0.0, strict=True)
        self.warm_up_green = number(warm_up_green, "warm_up_green", 0.0, strict=True)
        self.cost_limits = np.array([number(cost_limit, "cost_limit", 0.0)])
        self.num_costs = 1
        self._net = str(resolve_file("network", network, shipped_networks()))
        super().__init__(horizon, warm_up, step_seconds, backend, render_mode)
        self.lights = parse_lights(self._net)
        if not self.lights:
            raise ConfigError("network", network, "has no traffic light with two or more green phases")
        self.routes = straight_routes(self._net)
        self._route_file = self._write_routes()
        n = len(self.lights)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(n,), dtype=np.float32)
        hi = np.tile(np.r_[np.tile([2.0, 2.0, 1.5, 4.0], MAX_APPROACHES), 1.0, 1.0, 5.0], n)
        self.observation_space = spaces.Box(np.zeros_like(hi), hi, dtype=np.float64)
        self.red = OverTimeCounter(self.red_limit)

    @property
    def net_file(self) -> str:
        return self._net

    def _write_routes(self) -> Path:
        p = self.inflow / 3600.0
        lines = ["<routes>", '  <vType id="car" color="0,0.6,1"/>']
        if p > 0:
            for k, (src, dst) in enumerate(self.routes):
                lines.append(
                    f'  <flow id="f{k}" type="car" begin="0" end="1e9" from="{src}" to="{dst}" '
                    f'probability="{p:.9f}" departLane="best" departSpeed="max"/>'
                )
        text = "\n".join([*lines, "</routes>", ""])
        digest = hashlib.sha1((self._net + text).encode()).hexdigest()[:16]
        return write_atomic(cache_dir() / f"grid-{digest}.rou.xml", text)

    def _scenario_args(self) -> list[str]:
        return ["-n", self._net, "-r", str(self._route_file)]

    # -- controller state
    def _start_episode(self) -> None:
        n = len(self.lights)
        self.green = self.np_random.integers(0, [len(lt.greens) for lt in self.lights]).astype(int)
        self.in_yellow = np.zeros(n, bool)
        self.yellow_left = np.zeros(n)
        # random offsets of the warm-up's fixed-time plan: lights do not all switch together
        self.since = self.np_random.uniform(0.0, self.warm_up_green, size=n)
        self.red.reset()
        tl = self.sim.api.trafficlight
        self.states = [lt.greens[g] for lt, g in zip(self.lights, self.green, strict=True)]
        for lt, s in zip(self.lights, self.states, strict=True):
            tl.setRedYellowGreenState(lt.tls, s)
        from traci import constants as tc

        for lt in self.lights:
            for e in lt.approaches:
                self.sim.api.edge.subscribe(
                    e,
                    (
                        tc.LAST_STEP_VEHICLE_NUMBER,
                        tc.LAST_STEP_VEHICLE_HALTING_NUMBER,
                        tc.LAST_STEP_MEAN_SPEED,
                    ),
                )

    def _request(self, switch: np.ndarray) -> None:
        ok = switch & ~self.in_yellow & (self.since >= self.min_green - 1e-9)
        tl = self.sim.api.trafficlight
        for i in np.flatnonzero(ok):
            lt = self.lights[i]
            self.in_yellow[i], self.yellow_left[i] = True, self.yellow
            self.states[i] = lt.yellows[self.green[i]]
            tl.setRedYellowGreenState(lt.tls, self.states[i])

    def _warm_up_control(self) -> None:
        self._request(self.since >= self.warm_up_green)

    def _apply_action(self, action: np.ndarray) -> None:
        self._request(action > 0.0)

    def _substep(self, control: bool) -> tuple[float, float]:
        api = self.sim.api
        api.simulationStep()
        dt = self.sim_step
        # red runs include this sub-step's state (set before it)
        active = [
            (i, k)
            for i, (lt, s) in enumerate(zip(self.lights, self.states, strict=True))
            for k, r in enumerate(lt.red(s))
            if r
        ]
        cost = self.red.update(active, dt)
        reward = float(api.simulation.getArrivedNumber())
        self.since += dt
        self.yellow_left[self.in_yellow] -= dt
        done = np.flatnonzero(self.in_yellow & (self.yellow_left <= 1e-9))
        for i in done:
            lt = self.lights[i]
            self.green[i] = (self.green[i] + 1) % len(lt.greens)
            self.in_yellow[i], self.since[i] = False, 0.0
            self.states[i] = lt.greens[self.green[i]]
            api.trafficlight.setRedYellowGreenState(lt.tls, self.states[i])
        return reward, cost

    def _observe(self) -> np.ndarray:
        from traci import constants as tc

        sub = self.sim.api.edge.getAllSubscriptionResults()
        out = []
        for i, lt in enumerate(self.lights):
            block = np.zeros((MAX_APPROACHES, PER_APPROACH))
            for k, e in enumerate(lt.approaches):
                r = sub.get(e, {})
                block[k] = [
                    r.get(tc.LAST_STEP_VEHICLE_NUMBER, 0) / lt.capacity[k],
                    r.get(tc.LAST_STEP_VEHICLE_HALTING_NUMBER, 0) / lt.capacity[k],
                    max(r.get(tc.LAST_STEP_MEAN_SPEED, 0.0), 0.0) / lt.speed[k],
                    self.red.run((i, k)) / self.red_limit,
                ]
            g = self.green[i] / max(len(lt.greens) - 1, 1)
            out.append(np.r_[block.ravel(), g, float(self.in_yellow[i]), self.since[i] / 10.0])
        obs = np.concatenate(out)
        return np.clip(obs, self.observation_space.low, self.observation_space.high)

    def _draw_extra(self, ax) -> None:
        for lt, s in zip(self.lights, self.states, strict=True):
            for idx, xy in zip(lt.links, lt.stop_xy, strict=True):
                ch = (
                    "G"
                    if any(s[i] in "Gg" for i in idx)
                    else ("y" if any(s[i] in "yY" for i in idx) else "r")
                )
                ax.scatter([xy[0]], [xy[1]], s=30, c=_COLOURS[ch], marker="s", zorder=4)
