"""Reports of a preference run: the true return and costs in each iteration record (the optimiser's own
estimates are on the learned scale), the curve of queries and reward correlation, ``metrics.json``
additions, ``preference_rounds.json`` and ``preference_curves.png``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bayescrl.constrained.core.adapter import AlgorithmView
from bayescrl.utils.io import write_json
from bayescrl.utils.plotting import plt


class PreferenceReport:
    """Collects :attr:`curve` (one point per iteration) and writes the run's preference results."""

    def __init__(self, learned_cost: bool):
        self.learned_cost = learned_cost
        self.curve: list[dict] = []

    def on_iteration(
        self,
        record: dict,
        num_queries: int,
        corr: float,
        true_estimates: tuple[float, list[float]] | None,
        num_cost_queries: int,
    ) -> None:
        """Add the preference fields to the iteration record (true J / J_C replace the learned ones)."""
        record["num_queries"] = num_queries
        record["reward_correlation"] = corr
        if true_estimates is not None:
            if self.learned_cost:
                record["learned_ep_costs"] = record["ep_costs"]
                record["num_cost_queries"] = num_cost_queries
            record["ep_return"], record["ep_costs"] = true_estimates
        self.curve.append(
            {
                "iteration": record["iteration"],
                "env_steps": record["env_steps"],
                "num_queries": num_queries,
                "true_return": record["ep_return"],
                "true_costs": record["ep_costs"],
                "reward_correlation": corr,
            }
        )

    def final_correlation(self) -> float | None:
        """Mean reward correlation over the last tenth of the curve (None before the first label)."""
        tail = [c["reward_correlation"] for c in self.curve[-max(1, len(self.curve) // 10) :]]
        tail = [c for c in tail if c == c]  # NaN before the first label (a constant learned reward)
        return float(np.mean(tail)) if tail else None

    def write(
        self, out_dir: str | Path, metrics: dict, extra: dict, rounds: list, view: AlgorithmView
    ) -> dict:
        """``metrics`` plus ``final_true_return``, ``final_true_costs`` and ``extra`` into ``metrics.json``;
        ``preference_rounds.json`` and ``preference_curves.png``."""
        out = Path(out_dir)
        metrics = dict(metrics)
        metrics["final_true_return"] = metrics["final_return"]
        metrics["final_true_costs"] = metrics["final_costs"]
        metrics.update(extra)
        write_json(out / "metrics.json", metrics)
        write_json(out / "preference_rounds.json", {"rounds": rounds, "curve": self.curve})
        if self.curve:
            p = plt()
            fig, axes = p.subplots(1, 3, figsize=(12, 3.2))
            x = [c["env_steps"] for c in self.curve]
            axes[0].plot(x, [c["true_return"] for c in self.curve])
            axes[0].set_title("true episodic return")
            axes[0].set_ylabel("return (sum of true rewards per episode)")
            limits, labels = view.episode_cost_limits(), view.episode_limit_labels()
            for i, (lim, label) in enumerate(zip(limits, labels, strict=True)):
                (line,) = axes[1].plot(x, [c["true_costs"][i] for c in self.curve], label=f"cost {i}")
                axes[1].axhline(lim, ls="--", color=line.get_color(), lw=1, label=f"cost {i} {label}")
            axes[1].set_title("true episodic cost (limit dashed)")
            axes[1].set_ylabel("cost (sum per episode)")
            if len(limits):
                axes[1].legend(fontsize=7)
            axes[2].plot(x, [c["reward_correlation"] for c in self.curve])
            axes[2].set_title("corr(learned, true reward)")
            axes[2].set_ylabel("Pearson correlation (-1 to 1)")
            for ax in axes:
                ax.set_xlabel("env steps")
                ax.grid(alpha=0.3)
            fig.tight_layout()
            fig.savefig(out / "preference_curves.png", dpi=90)
            p.close(fig)
        return metrics
