"""Why the β sweep (figure `main_ablation` (b)) is not monotone at β = 100 on RiverSwim.

Prints, for D0 of N uniform-behaviour trajectory pairs (λ = 50, 40 seeds, seed 0 as in the sweep
configs, one random stream per seed as in ``bayescrl pspl``, i.e. the sweeps' D0), the offline-only MAP
of lemma `chapter4mapestimatelemma` (the output rule of `pspl` at k = 0): the centred estimates of
r(0, left) (true 0.005) and r(5, right) (true 1.0), the mean largest centred |θ̂| and the fraction of
seeds whose D0 visits the far bank at all.

    .venv/bin/python benchmarks/pspl_beta_diagnostic.py
"""

from __future__ import annotations

from bayescrl.pbrl.data import offline_dataset
from bayescrl.pbrl.envs import riverswim
from bayescrl.pbrl.posterior import TrajectoryPreferenceModel
from bayescrl.raters import BeliefRater
from bayescrl.utils import set_torch_threads
from bayescrl.utils.seeding import run_generators


def main() -> None:
    set_torch_threads()
    mdp = riverswim(S=6, H=20)
    far = 5 * mdp.A + 1  # (s = 5, a = right)
    for N in (20, 100):
        for beta in (1.0, 10.0, 100.0):
            g = run_generators(0, 40)  # seed b's rater and D0: the pspl runner's streams
            rater = BeliefRater.sample(mdp.theta, 40, beta, 50.0, generator=g)
            D = offline_dataset(mdp, rater, N, generator=g)
            model = TrajectoryPreferenceModel(D, mdp.S, mdp.A, 0, beta=beta, lam=50.0)
            res, _ = model.solve(1, perturbed=False)
            rel = res.theta[:, 0] - res.theta[:, 0].mean(-1, keepdim=True)
            seen = (D.phi[..., far].sum((-1, -2)) > 0).double().mean()
            print(
                f"N={N} beta={beta}: centred MAP r(0,left) {rel[:, 0].mean():.3f}, "
                f"r(5,right) {rel[:, far].mean():.3f}, max|.| {rel.abs().max(-1).values.mean():.3f}; "
                f"D0 reaches the far bank in {seen:.2f} of seeds"
            )


if __name__ == "__main__":
    main()
