"""Mutation check of the package's core maths: each listed single-line mutation must turn its tests red.

For every mutation the script applies the edit(s) to a *copy* of the repository (``git archive HEAD``
unpacked in a temporary directory, so the working tree is never touched), runs only the test node ids
that should catch it (``pytest -x -q``, one process, under ``nice``), records red ("caught") or green
("survived") and restores the file. A baseline run of every listed test on the unmutated copy must be
green first. Results go to ``tools/mutation_report.json`` and a table on stdout; the exit status is 1
if a mutation survives or the baseline is red.

Usage::

    .venv/bin/python tools/mutation_check.py [--only NAME ...] [--worktree] [--report PATH]

With ``--only`` the run's rows replace those of the same mutations in an existing report (the others are
kept, each row naming the source it ran on); the exit status reflects this run's mutations.
``--worktree`` copies the current working-tree versions of the tracked files instead of ``HEAD``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
T_BANDIT = "tests/test_bandit_math_pins.py"
T_CORE = "tests/test_core_math_pins.py"
T_CRL = "tests/test_crl_math_pins.py"
T_PSPL = "tests/test_pspl_math_pins.py"
T_PREF = "tests/test_prefrl_math_pins.py"
T_ACPO = "tests/test_acpo_deep.py"
T_UPD = "tests/test_crl_update_pins.py"
T_MOPO = "tests/test_mopo_math_pins.py"
T_SEED = "tests/test_core_seeding_pins.py"
T_SAMP = "tests/test_core_sampler_pins.py"
T_ACPO_MATH = "tests/test_acpo_math.py"


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str
    edits: tuple[tuple[str, str, str], ...]  # (file, exact original snippet, mutated snippet)
    tests: tuple[str, ...]  # pytest node ids expected to fail


def _one(name, what, path, old, new, *tests) -> Mutation:
    return Mutation(name, what, ((path, old, new),), tuple(tests))


COMPETENCE = "bayescrl/raters/competence.py"
LIKELIHOOD = "bayescrl/raters/likelihood.py"
BT_FAST = "bayescrl/inference/bootstrap.py"
BT_PYRO = "bayescrl/models/pyro_models.py"
ECOP = "bayescrl/constrained/ecop.py"
GAE = "bayescrl/constrained/core/advantages.py"

BT_SIGN_FAST = (BT_FAST, "self.delta = pb.x1 - pb.x0", "self.delta = pb.x0 - pb.x1")
BT_SIGN_PYRO = (BT_PYRO, "logits = bt_logit(x1, x0, vt_n,", "logits = bt_logit(x0, x1, vt_n,")
LAM2_FAST = (BT_FAST, "self.lam2 = pb.lam.expand(B, R).to(dt) ** 2", "self.lam2 = pb.lam.expand(B, R).to(dt)")
LAM2_PYRO = (
    BT_PYRO,
    "dist.Normal(theta, (1.0 / lam_v).unsqueeze(-1))",
    "dist.Normal(theta, (1.0 / lam_v.sqrt()).unsqueeze(-1))",
)
BT_FAST_TESTS = (
    f"{T_CORE}::test_fast_surrogate_loss_is_eq_mapestimateproblem",
    f"{T_CORE}::test_fast_map_is_a_stationary_point_of_the_hand_written_loss",
)
BT_PYRO_TESTS = (f"{T_CORE}::test_pyro_model_density_is_the_closed_form",)

MUTATIONS: list[Mutation] = [
    # ---- the seven mutations of the issue
    _one(
        "1-lints-scale-squared",
        "LinTS posterior inflation v -> v² (samples ~ N(m, v⁴Σ))",
        "bayescrl/bandits/agents.py",
        "return mean + self.scale * (self.post.sample",
        "return mean + self.scale**2 * (self.post.sample",
        f"{T_BANDIT}::test_lints_samples_have_covariance_v_squared_sigma",
    ),
    _one(
        "2a-competence-lambda-evidence",
        "competence evidence: prior of ϑ Σ0 + I/λ instead of I/λ²",
        COMPETENCE,
        "device=cov0.device) / lam**2\n    z = signed_diff",
        "device=cov0.device) / lam\n    z = signed_diff",
        f"{T_BANDIT}::test_competence_evidence_matches_quadrature_with_nonzero_prior_mean",
    ),
    _one(
        "2b-competence-lambda-model",
        "competence Pyro model: prior of ϑ Σ0 + I/λ instead of I/λ²",
        COMPETENCE,
        "device=cov0.device) / lam**2\n    loc = torch.as_tensor",
        "device=cov0.device) / lam\n    loc = torch.as_tensor",
        f"{T_BANDIT}::test_competence_model_density_is_the_closed_form",
    ),
    _one(
        "3-signed-diff-sign",
        "_signed_diff: s_n = 2Y − 1 (loser − winner); visible only with μ0 ≠ 0",
        LIKELIHOOD,
        "sign = 1.0 - 2.0 * y.to(x0.dtype)",
        "sign = 2.0 * y.to(x0.dtype) - 1.0",
        f"{T_BANDIT}::test_competence_evidence_matches_quadrature_with_nonzero_prior_mean",
        f"{T_BANDIT}::test_signed_diff_is_preferred_minus_other",
    ),
    _one(
        "4-pspl-chol-transpose",
        "PSPL θ draws eps @ L instead of eps @ Lᵀ (covariance LᵀL)",
        "bayescrl/pbrl/agents.py",
        "eps @ torch.linalg.cholesky(cov).mT",
        "eps @ torch.linalg.cholesky(cov)",
        f"{T_PSPL}::test_pspl_theta_draws_have_the_posterior_covariance",
    ),
    _one(
        "5-cg-iters-minus-one",
        "conjugate gradient runs iters − 1 iterations (the one CG, used by ACPO)",
        "bayescrl/constrained/core/optim.py",
        "    for _ in range(iters):\n        if bool((rr <= tol).all()):",
        "    for _ in range(iters - 1):\n        if bool((rr <= tol).all()):",
        f"{T_CRL}::test_cg_uses_its_whole_budget_and_is_exact_in_d_steps",
    ),
    _one(
        "6-ecop-zeta-sqrt-m",
        "e-COP damping threshold ζ = m/β max|λ| instead of √m/β max|λ|",
        ECOP,
        "zeta = math.sqrt(lam.numel()) / beta",
        "zeta = lam.numel() / beta",
        f"{T_CRL}::test_ecop_damping_threshold_by_hand",
    ),
    _one(
        "7-gae-cut-at-termination-only",
        "discounted GAE recursion cut only at terminations (runs through a truncation)",
        GAE,
        "adv = _backward(delta, gamma * lam * (1.0 - end))",
        "adv = _backward(delta, gamma * lam * (1.0 - term))",
        f"{T_CRL}::test_discounted_gae_cuts_the_recursion_at_a_mid_rollout_truncation",
    ),
    # ---- the extra ones of the issue
    Mutation("8a-bt-sign-fast", "Bradley–Terry sign, fast solver only", (BT_SIGN_FAST,), BT_FAST_TESTS),
    Mutation("8b-bt-sign-pyro", "Bradley–Terry sign, Pyro model only", (BT_SIGN_PYRO,), BT_PYRO_TESTS),
    Mutation(
        "8c-bt-sign-both",
        "Bradley–Terry sign in both paths (the generic-vs-fast cross-check cannot see it)",
        (BT_SIGN_FAST, BT_SIGN_PYRO),
        BT_FAST_TESTS + BT_PYRO_TESTS,
    ),
    Mutation("9a-lambda2-fast", "λ² -> λ in L3, fast solver only", (LAM2_FAST,), BT_FAST_TESTS),
    Mutation(
        "9b-lambda2-pyro", "ϑ ~ N(θ, I/λ) instead of I/λ², Pyro model only", (LAM2_PYRO,), BT_PYRO_TESTS
    ),
    Mutation(
        "9c-lambda2-both",
        "λ² -> λ in both paths (the generic-vs-fast cross-check cannot see it)",
        (LAM2_FAST, LAM2_PYRO),
        BT_FAST_TESTS + BT_PYRO_TESTS,
    ),
    _one(
        "10-ecop-lambda-sign",
        "e-COP multiplier update λ − βΨ instead of λ + βΨ",
        ECOP,
        "torch.clamp(lam + beta * psi, min=0.0)",
        "torch.clamp(lam - beta * psi, min=0.0)",
        f"{T_CRL}::test_ecop_multiplier_update_by_hand",
    ),
    _one(
        "11-top-two-challenger-draw",
        "top-two: the challenger's draw b may equal a (b = a + U{0..S−2})",
        "bayescrl/prefrl/queries.py",
        "(a + 1 + torch.randint(max(S - 1, 1)",
        "(a + torch.randint(max(S - 1, 1)",
        f"{T_PREF}::test_top_two_selection_probabilities",
    ),
    # ---- further pins added with these
    _one(
        "12-ecop-secondary-cost",
        "e-COP secondary cost C uses −λβ instead of −λ/β",
        ECOP,
        "torch.maximum(gap.double(), -lam.double() / beta)",
        "torch.maximum(gap.double(), -lam.double() * beta)",
        f"{T_CRL}::test_ecop_damping_threshold_by_hand",
    ),
    _one(
        "13-average-gae-cut",
        "average-reward GAE recursion cut only at terminations",
        GAE,
        "adv = _backward(delta, lam * (1.0 - end))",
        "adv = _backward(delta, lam * (1.0 - term))",
        f"{T_CRL}::test_average_gae_cuts_the_recursion_at_a_mid_rollout_truncation",
    ),
    _one(
        "14-competence-model-sign",
        "competence Pyro model: P(Y = 1) = σ(β⟨Ā⁽⁰⁾ − Ā⁽¹⁾, ϑ⟩)",
        COMPETENCE,
        "logit_y1 = -beta * ((x0 - x1) * vt).sum(-1)",
        "logit_y1 = beta * ((x0 - x1) * vt).sum(-1)",
        f"{T_BANDIT}::test_competence_model_density_is_the_closed_form",
    ),
    _one(
        "15-competence-undamped-newton",
        "competence evidence: every Newton step accepted (the undamped solve that 2-cycled)",
        COMPETENCE,
        "ok = (f_new >= f) | tiny",
        "ok = torch.ones_like(tiny)",
        f"{T_BANDIT}::test_competence_evidence_newton_does_not_cycle",
    ),
    # ---- tests/test_acpo_deep.py's update tests, which could not fail before
    _one(
        "16-acpo-recovery-step-size",
        "ACPO recovery step √δ instead of √(2δ) (half the trust region)",
        "bayescrl/constrained/acpo_math.py",
        "return -math.sqrt(2 * delta) * step",
        "return -math.sqrt(delta) * step",
        f"{T_ACPO}::test_acpo_update_respects_trust_region_and_writes_protocol_metrics",
    ),
    _one(
        "17-acpo-recovery-sign",
        "ACPO recovery step ascends the violated cost",
        "bayescrl/constrained/acpo_math.py",
        "return -math.sqrt(2 * delta) * step",
        "return math.sqrt(2 * delta) * step",
        f"{T_ACPO}::test_acpo_update_respects_trust_region_and_writes_protocol_metrics",
    ),
    _one(
        "18-atrpo-step-size",
        "ATRPO step √(δ/dᵀHd) instead of √(2δ/dᵀHd)",
        "bayescrl/constrained/atrpo.py",
        "scale = math.sqrt(2.0 * delta / dHd)",
        "scale = math.sqrt(delta / dHd)",
        f"{T_ACPO}::test_atrpo_runs_and_config_errors",
    ),
    _one(
        "19-rater-pool-evidence-logdet-sign",
        "laplace-eb competence gradient with +½ ∂log det H instead of −½ (the Laplace evidence's Occam term)",
        "bayescrl/inference/hierarchical.py",
        "g = -dloss - 0.5 * dlogdet",
        "g = -dloss + 0.5 * dlogdet",
        "tests/test_hierarchical_raters.py::test_analytic_competence_gradient_matches_autograd_of_the_laplace_objective",
    ),
    _one(
        "20-rater-pool-block-solve",
        "block-arrow solve: x_i = A_i⁻¹ r_i, dropping the rater beliefs' coupling λ_i² A_i⁻¹ x_θ to θ",
        "bayescrl/inference/hierarchical.py",
        "x_V = y + lam2 * (x_theta.unsqueeze(1).to(lp.ainv.dtype) @ lp.ainv).to(dt)",
        "x_V = y + 0 * lam2 * (x_theta.unsqueeze(1).to(lp.ainv.dtype) @ lp.ainv).to(dt)",
        "tests/test_hierarchical_raters.py::test_block_arrow_solve_and_log_det_match_the_dense_hessian",
    ),
    _one(
        "20b-rater-pool-hessian-vector",
        "laplace-eb inner conjugate gradients: H v without the θ prior precision Σ0⁻¹ v_θ",
        "bayescrl/inference/hierarchical.py",
        "return v_t @ pool.prec0 + diff.sum(0), Kv - diff",
        "return diff.sum(0), Kv - diff",
        "tests/test_hierarchical_raters.py::test_hessian_vector_product_matches_the_dense_hessian",
    ),
    _one(
        "20c-rater-pool-latent-draws",
        "laplace-eb draws: ϑ_i − ϑ̂_i = L_i⁻ᵀ e_i, dropping the coupling A_i⁻¹ λ_i² (θ − θ̂) to θ's draw",
        "bayescrl/inference/hierarchical.py",
        "half + e_V.transpose(0, 1)",
        "e_V.transpose(0, 1)",
        "tests/test_hierarchical_raters.py::test_latent_draws_have_the_inverse_hessian_as_covariance",
    ),
    _one(
        "20d-rater-pool-woodbury-logdet",
        "laplace-eb U < d blocks: log det A_i = log det C_i without the (d − U) log λ_i² of the lemma",
        "bayescrl/inference/hierarchical.py",
        "logdet = (d - U) * lam2.log() + 2 * chol_c",
        "logdet = 0 * lam2.log() + 2 * chol_c",
        "tests/test_hierarchical_raters.py::test_woodbury_blocks_match_the_dense_factorisations",
    ),
    _one(
        "20e-rater-pool-level-prior-gradient",
        "pooled λ prior: gradient without the pool level's term c Σ e (the independent prior's gradient)",
        "bayescrl/inference/hierarchical.py",
        "return logp, -(e - c * se * free) / scale**2",
        "return logp, -e / scale**2",
        "tests/test_hierarchical_raters.py::test_pooled_competence_prior_is_the_marginal_of_the_pool_level",
    ),
    _one(
        "20f-noncentred-lognormal",
        "svi/nuts decentre LogNormal sites too (their base is a Normal): loc + scale·LogNormal(0, 1)",
        "bayescrl/inference/sites.py",
        'if not i.observed and i.dist_name == "Normal" and _real(i.support)',
        'if not i.observed and i.dist_name == "Normal"',
        "tests/test_hierarchical_raters.py::test_noncentred_leaves_lognormal_competences_centred",
    ),
    _one(
        "20g-rater-pool-newton-step",
        "laplace-eb: no Newton step after L-BFGS-B's coarse stop (the optimum left at a gradient of 10⁻²)",
        "bayescrl/inference/hierarchical.py",
        "u_hat = _newton_polish(ev, u_hat, hess)",
        "u_hat = u_hat",
        "tests/test_hierarchical_raters.py::test_newton_step_after_the_optimiser_reaches_the_tight_optimum",
    ),
    _one(
        "20h-rater-pool-search-cap",
        "laplace-eb: trial points solved to the end like the optimum (a wild one costs hundreds of steps)",
        "bayescrl/inference/hierarchical.py",
        'search = self.fast and self.warm["h"] is not None',
        "search = False",
        "tests/test_hierarchical_raters.py::test_a_wild_trial_point_is_not_solved_to_the_end",
    ),
    _one(
        "20i-rater-pool-newton-step-kept-blindly",
        "laplace-eb: the Newton step after the optimiser kept even where it lowers the evidence",
        "bayescrl/inference/hierarchical.py",
        'if not (ok and st["F"] >= before["F"] - 1e-9):',
        "if False:",
        "tests/test_hierarchical_raters.py::test_a_newton_step_that_lowers_the_evidence_is_rejected",
    ),
    _one(
        "20j-rater-pool-search-float32-small-lambda",
        "laplace-eb search mode: float32 blocks even for λ_i² < 10⁻² (cancellation in (I − MᵀM)/λ²)",
        "bayescrl/inference/hierarchical.py",
        "return x.dtype if bool((lam2 < _SEARCH_MIN_LAM2).any()) else torch.float32",
        "return torch.float32",
        "tests/test_hierarchical_raters.py::test_search_mode_gradient_is_close_to_the_exact_one",
    ),
    _one(
        "20k-rater-pool-search-trace-cancels",
        "laplace-eb: λ² tr Cov(θ − ϑ_i) − d from the four-term sum tr S⁻¹ − 2λ² tr(S⁻¹A⁻¹) + tr A⁻¹"
        " + λ⁴ tr(A⁻¹S⁻¹A⁻¹) (equal in exact arithmetic; cancels in float32 where λ_i is large)",
        "bayescrl/inference/hierarchical.py",
        "    lam_cov = lam2 * tr_psp.to(dt) - p_p.diagonal(dim1=-2, dim2=-1).sum(-1).to(dt)",
        "    lam_cov = lam2 * (sinv.diagonal(dim1=-2, dim2=-1).sum(-1).unsqueeze(-1)"
        " - 2 * lam2 * (a_p.flatten(-2) @ s_p.flatten(-2).mT).squeeze(-1).to(dt)"
        " + a_p.diagonal(dim1=-2, dim2=-1).sum(-1).to(dt)"
        " + lam2**2 * torch.linalg.vecdot((s_p @ a_p).flatten(-2), a_p.flatten(-2)).to(dt)) - d",
        "tests/test_hierarchical_raters.py::test_search_mode_gradient_is_close_to_the_exact_one",
    ),
    _one(
        "20l-rater-pool-float32-hessian-step",
        "laplace-eb: the float32 competence Hessian with the float64 step 10⁻⁴ (rounding / step swamps it)",
        "bayescrl/inference/hierarchical.py",
        "_HESS_EPS_SEARCH = 5e-4",
        "_HESS_EPS_SEARCH = 1e-4",
        "tests/test_hierarchical_raters.py::test_float32_competence_hessian_is_close_to_the_float64_one",
    ),
    _one(
        "20m-rater-pool-unsolved-point-seeds-the-next",
        "laplace-eb: an unsolved wild trial point becomes the next inner solve's start and preconditioner",
        "bayescrl/inference/hierarchical.py",
        "        if ok or not search:  # (inner_ok is judged at the last, returned point)",
        "        if True:  # (inner_ok is judged at the last, returned point)",
        "tests/test_hierarchical_raters.py::test_a_wild_trial_point_is_not_solved_to_the_end",
    ),
    _one(
        "21-torn-log-keeps-one-record-too-few",
        "resume trims the metrics log to records before the checkpoint (< instead of <=)",
        "bayescrl/utils/io.py",
        "if isinstance(at, int) and at <= upto:",
        "if isinstance(at, int) and at < upto:",
        "tests/test_utils.py::test_trim_jsonl_keeps_records_up_to_the_checkpoint_and_drops_only_a_torn_last_line",
    ),
    # ---- every baseline's update by hand (tests/test_crl_update_pins.py) and the remaining pins
    _one(
        "22-appo-multiplier-descends",
        "APPO: Adam on +λ·(J_C − d) (the multiplier descends on a violated constraint)",
        "bayescrl/constrained/appo.py",
        "(-(self.lam * gap.double()).sum()).backward()",
        "((self.lam * gap.double()).sum()).backward()",
        f"{T_UPD}::test_appo_adam_multiplier_step_and_augmented_loss_by_hand",
    ),
    _one(
        "23-appo-denominator-lambda",
        "APPO: loss normalised by 1 + Σλ instead of 1 + Σf",
        "bayescrl/constrained/appo.py",
        "denom = 1.0 + float(f.sum())",
        "denom = 1.0 + float(lam.sum())",
        f"{T_UPD}::test_appo_adam_multiplier_step_and_augmented_loss_by_hand",
    ),
    _one(
        "24-appo-cost-surrogate-optimistic",
        "APPO: cost surrogate min(ρA_C, clip(ρ)A_C) instead of the pessimistic max",
        "bayescrl/constrained/appo.py",
        'adv_c[idx], cfg.clip, "max")',
        'adv_c[idx], cfg.clip, "min")',
        f"{T_UPD}::test_appo_adam_multiplier_step_and_augmented_loss_by_hand",
    ),
    _one(
        "25-appo-factor-without-multiplier",
        "APPO: the factor f uses the multiplier before its Adam step",
        "bayescrl/constrained/appo.py",
        "lam = self.update_multipliers(gap) if self.m else self.lam.detach()",
        "lam = self.lam.detach().clone(); self.update_multipliers(gap) if self.m else None",
        f"{T_UPD}::test_appo_adam_multiplier_step_and_augmented_loss_by_hand",
    ),
    _one(
        "26-p3o-gap-discount",
        "P3O: constraint gap scaled by γ_C instead of (1 − γ_C)",
        "bayescrl/constrained/p3o.py",
        "gap = ((1.0 - gam_c) *",
        "gap = ((gam_c) *",
        f"{T_UPD}::test_p3o_penalised_loss_by_hand",
    ),
    _one(
        "27-p3o-relu-of-surrogate-only",
        "P3O: ReLU(L_C) + gap instead of ReLU(L_C + gap)",
        "bayescrl/constrained/p3o.py",
        "torch.relu(l_c + gap).sum()",
        "(torch.relu(l_c) + gap).sum()",
        f"{T_UPD}::test_p3o_penalised_loss_by_hand",
    ),
    _one(
        "28-p3o-cost-surrogate-optimistic",
        "P3O: cost surrogate min(ρA_C, clip(ρ)A_C) instead of max",
        "bayescrl/constrained/p3o.py",
        'adv_c[idx], cfg.clip, "max")',
        'adv_c[idx], cfg.clip, "min")',
        f"{T_UPD}::test_p3o_penalised_loss_by_hand",
    ),
    _one(
        "29-focops-temperature",
        "FOCOPS: ρA·λ instead of ρA/λ",
        "bayescrl/constrained/focops.py",
        "ratio * adv[idx] / cfg.temperature",
        "ratio * adv[idx] * cfg.temperature",
        f"{T_UPD}::test_focops_nu_step_and_loss_by_hand",
    ),
    _one(
        "30-focops-kl-direction",
        "FOCOPS: KL(π_k ‖ π_θ) instead of KL(π_θ ‖ π_k)",
        "bayescrl/constrained/focops.py",
        "kl = self.policy.kl(dist, old_i)",
        "kl = self.policy.kl(old_i, dist)",
        f"{T_UPD}::test_focops_nu_step_and_loss_by_hand",
    ),
    _one(
        "31-focops-mask-direction",
        "FOCOPS: keeps the states with KL > δ instead of KL ≤ δ",
        "bayescrl/constrained/focops.py",
        "(kl.detach() <= cfg.delta)",
        "(kl.detach() > cfg.delta)",
        f"{T_UPD}::test_focops_nu_step_and_loss_by_hand",
    ),
    _one(
        "32-focops-cost-sign",
        "FOCOPS: A + Σν A_C instead of A − Σν A_C",
        "bayescrl/constrained/focops.py",
        "adv = adv_r - (adv_c * nu).sum(-1)",
        "adv = adv_r + (adv_c * nu).sum(-1)",
        f"{T_UPD}::test_focops_nu_step_and_loss_by_hand",
    ),
    _one(
        "33-focops-nu-cap",
        "FOCOPS: ν clipped at ν_max + 1",
        "bayescrl/constrained/focops.py",
        "0.0, cfg.nu_max)",
        "0.0, cfg.nu_max + 1)",
        f"{T_UPD}::test_focops_nu_step_and_loss_by_hand",
    ),
    _one(
        "34-ipo-weight-without-horizon",
        "IPO: barrier weight 1/(t slack) instead of H_eff/(t slack)",
        "bayescrl/constrained/ipo.py",
        "slack > 0, h_eff / (cfg.t",
        "slack > 0, 1.0 / (cfg.t",
        f"{T_UPD}::test_ipo_barrier_weights_and_loss_by_hand",
    ),
    _one(
        "35-ipo-unnormalised-advantage",
        "IPO: penalised advantage not divided by 1 + Σw",
        "bayescrl/constrained/ipo.py",
        ".sum(-1)) / (1.0 + float(self.w.sum()))",
        ".sum(-1)) / 1.0",
        f"{T_UPD}::test_ipo_barrier_weights_and_loss_by_hand",
    ),
    _one(
        "36-ppo-lag-denominator",
        "PPO-L: loss not normalised by 1 + Σλ",
        "bayescrl/constrained/ppo_lag.py",
        "denom = 1.0 if fixed else 1.0 + float(lam.sum())",
        "denom = 1.0",
        f"{T_UPD}::test_ppo_lag_multiplier_step_and_loss_by_hand",
    ),
    _one(
        "37-ppo-lag-multiplier-rate",
        "PPO-L multipliers: λ + (J_C − d) instead of λ + lr (J_C − d)",
        "bayescrl/constrained/core/optim.py",
        "self.value + self.lr * (ep_costs.double()",
        "self.value + (ep_costs.double()",
        f"{T_UPD}::test_ppo_lag_multiplier_step_and_loss_by_hand",
    ),
    _one(
        "38-pcpo-projection-sign",
        "PCPO: projection (α r − c)/s instead of (α r + c)/s",
        "bayescrl/constrained/pcpo.py",
        "proj = max(0.0, (alpha * tq.r + c)",
        "proj = max(0.0, (alpha * tq.r - c)",
        f"{T_UPD}::test_pcpo_step_is_the_kl_projection_by_hand",
    ),
    _one(
        "39-pcpo-step-size",
        "PCPO: reward step √(δ/q) instead of √(2δ/q)",
        "bayescrl/constrained/pcpo.py",
        "alpha = math.sqrt(2 * delta / (tq.q + EPS))",
        "alpha = math.sqrt(delta / (tq.q + EPS))",
        f"{T_UPD}::test_pcpo_step_is_the_kl_projection_by_hand",
    ),
    _one(
        "40-cpo-pcpo-constraint-per-episode",
        "CPO/PCPO: c = J_C − d (per episode) instead of (J_C − d)/H_eff (per step)",
        "bayescrl/constrained/core/trust_region.py",
        "- algo.cost_limits[0]) / h_eff if algo.m",
        "- algo.cost_limits[0]) if algo.m",
        f"{T_UPD}::test_cpo_step_and_per_step_constraint_value_by_hand",
    ),
    _one(
        "41-cpo-step-cost-sign",
        "CPO: step (H⁻¹g + ν H⁻¹b)/λ instead of (H⁻¹g − ν H⁻¹b)/λ",
        "bayescrl/constrained/cpo.py",
        "(tq.v - nu * tq.w) / (lam + EPS)",
        "(tq.v + nu * tq.w) / (lam + EPS)",
        f"{T_UPD}::test_cpo_step_and_per_step_constraint_value_by_hand",
    ),
    _one(
        "42-bootstrap-anchor-at-2mu0",
        "perturbed MAP: prior anchor μ0 + θ' with θ' ~ N(μ0, Σ0) (the thesis' text: centred at 2μ0)",
        BT_FAST,
        "anchor = pb.mu0 + draw(torch.randn, (B, M, d), generator, **kw) @ chol.mT",
        "anchor = 2 * pb.mu0 + draw(torch.randn, (B, M, d), generator, **kw) @ chol.mT",
        f"{T_CORE}::test_perturbed_map_anchor_when_the_prior_dominates_the_data",
    ),
    _one(
        "43-bootstrap-anchor-transposed-factor",
        "perturbed MAP: anchor noise z @ L (covariance Lᵀ L) instead of z @ Lᵀ",
        BT_FAST,
        "generator, **kw) @ chol.mT",
        "generator, **kw) @ chol",
        f"{T_CORE}::test_perturbed_map_anchor_when_the_prior_dominates_the_data",
    ),
    _one(
        "44-mopo-bt-prior-scale",
        "MOPO Bradley–Terry fit (infer-beta/joint): prior covariance s I instead of s² I",
        "bayescrl/mopo/preferences.py",
        '        prior_sd**2 * torch.eye(d, dtype=torch.float64, device="cpu"),\n        betas,',
        '        prior_sd * torch.eye(d, dtype=torch.float64, device="cpu"),\n        betas,',
        f"{T_MOPO}::test_bt_reward_posterior_is_the_hand_laplace_with_prior_variance_s_squared",
    ),
    _one(
        "45-mopo-pool-prior-scale",
        "MOPO Bradley–Terry fit (infer, the default): prior covariance s I instead of s² I",
        "bayescrl/mopo/preferences.py",
        'cov0=prior_sd**2 * torch.eye(d, dtype=torch.float64, device="cpu"),',
        'cov0=prior_sd * torch.eye(d, dtype=torch.float64, device="cpu"),',
        f"{T_MOPO}::test_bt_reward_posterior_is_the_hand_laplace_with_prior_variance_s_squared",
    ),
    _one(
        "46-seeding-run-offset",
        "run_generators: run r seeded seed + r + 1",
        "bayescrl/utils/seeding.py",
        "manual_seed(k(seed + r))",
        "manual_seed(k(seed + r + 1))",
        f"{T_SEED}::test_run_generators_are_seed_plus_run",
    ),
    _one(
        "47-seeding-block-offset",
        "per-run blocks all start at row 0 (every run reads run 0's rows)",
        "bayescrl/utils/seeding.py",
        "return [(g, i * m, m) for i, g in enumerate(generator)]",
        "return [(g, 0, m) for i, g in enumerate(generator)]",
        f"{T_SEED}::test_per_run_blocks_read_each_runs_own_rows",
    ),
    _one(
        "48-seeding-block-order",
        "per_run: the runs' blocks concatenated in reverse order",
        "bayescrl/utils/seeding.py",
        "return parts[0] if len(parts) == 1 else torch.cat(parts, dim)\n\n\ndef draw",
        "return parts[0] if len(parts) == 1 else torch.cat(parts[::-1], dim)\n\n\ndef draw",
        f"{T_SEED}::test_per_run_blocks_read_each_runs_own_rows",
    ),
    _one(
        "49-diffusion-grad-through-normalisation",
        "reward-gradient step differentiates through the reward's sd (not detached)",
        "bayescrl/pbrl/diffusion/policy.py",
        "loss = -(r / (r.detach().std(1, keepdim=True) + 1e-8))",
        "loss = -(r / (r.std(1, keepdim=True) + 1e-8))",
        f"{T_PSPL}::test_reward_gradient_step_by_hand",
    ),
    _one(
        "50-diffusion-sd-over-policies",
        "reward-gradient step normalised by the sd over policies instead of over rollouts",
        "bayescrl/pbrl/diffusion/policy.py",
        "r.detach().std(1, keepdim=True)",
        "r.detach().std(0, keepdim=True)",
        f"{T_PSPL}::test_reward_gradient_step_by_hand",
    ),
    _one(
        "51-diffusion-score-function-sign",
        "reward-gradient step adds the score-function term with the wrong sign",
        "bayescrl/pbrl/diffusion/policy.py",
        "loss = loss - (sf_adv.detach().unsqueeze(-1) * logp)",
        "loss = loss + (sf_adv.detach().unsqueeze(-1) * logp)",
        f"{T_PSPL}::test_reward_gradient_step_by_hand",
    ),
    _one(
        "52-exact-sample-transposed-factor",
        "exact Gaussian posterior draws ε L instead of ε Lᵀ (covariance Lᵀ L)",
        "bayescrl/inference/exact.py",
        "return self.mean.unsqueeze(-2) + eps @ chol.mT",
        "return self.mean.unsqueeze(-2) + eps @ chol",
        f"{T_SAMP}::test_exact_gaussian_draws_have_the_posterior_moments",
    ),
    _one(
        "53-laplace-sample-transposed-factor",
        "Laplace draws ε L instead of ε Lᵀ",
        "bayescrl/inference/laplace.py",
        "z = self.mean.unsqueeze(-2) + eps @ chol.mT",
        "z = self.mean.unsqueeze(-2) + eps @ chol",
        f"{T_SAMP}::test_laplace_draws_have_the_joint_gaussian_moments",
    ),
    _one(
        "54-gamma-boost-exponent",
        "Gamma sampler boost for α < 1: U^α instead of U^{1/α}",
        "bayescrl/inference/exact.py",
        "out * u ** (1.0 / alpha)",
        "out * u ** alpha",
        f"{T_SAMP}::test_dirichlet_gamma_sampler_has_the_dirichlet_moments",
    ),
    _one(
        "55-gamma-marsaglia-tsang-d",
        "Marsaglia–Tsang d = α − 1/2 instead of α − 1/3",
        "bayescrl/inference/exact.py",
        "d = a - 1.0 / 3.0",
        "d = a - 1.0 / 2.0",
        f"{T_SAMP}::test_dirichlet_gamma_sampler_has_the_dirichlet_moments",
    ),
    _one(
        "56-ecop-cost-surrogate-per-sample",
        "e-COP: L_C = E[max(ρA_C, clip(ρ)A_C)] without the H_eff (per-sample next to an episode gap)",
        ECOP,
        "l_c = h_eff * clipped_surrogate(",
        "l_c = clipped_surrogate(",
        f"{T_UPD}::test_ecop_loss_by_hand",
    ),
    _one(
        "57-ecop-per-step-weight",
        "e-COP per_step: penalty not divided by H_eff",
        ECOP,
        "(1.0, 1.0 / h_eff) if cfg.constraint_scale",
        "(1.0, 1.0) if cfg.constraint_scale",
        f"{T_UPD}::test_ecop_loss_by_hand",
    ),
    _one(
        "58-ecop-cost-surrogate-optimistic",
        "e-COP: cost surrogate min(ρA_C, clip(ρ)A_C) instead of max",
        ECOP,
        'adv_c[idx], cfg.clip, "max")',
        'adv_c[idx], cfg.clip, "min")',
        f"{T_UPD}::test_ecop_loss_by_hand",
    ),
    _one(
        "59-acpo-single-mu-sign",
        "ACPO closed-form dual: μ = (λc − r)/s instead of (λc + r)/s",
        "bayescrl/constrained/acpo_math.py",
        "mu = max(0.0, (lam * c + r) / s)",
        "mu = max(0.0, (lam * c - r) / s)",
        f"{T_ACPO_MATH}::test_single_constraint_closed_form_matches_convex_solve_and_primal",
    ),
    _one(
        "60-acpo-dual-step-sign",
        "ACPO step (H⁻¹g + H⁻¹Aμ)/λ instead of (H⁻¹g − H⁻¹Aμ)/λ",
        "bayescrl/constrained/acpo_math.py",
        "direction = direction - W.reshape(v.shape[0], -1) @ mu",
        "direction = direction + W.reshape(v.shape[0], -1) @ mu",
        f"{T_ACPO_MATH}::test_single_constraint_closed_form_matches_convex_solve_and_primal",
    ),
    _one(
        "61-acpo-convex-lambda",
        "ACPO convex dual: λ = √quad · √(2δ) instead of √quad / √(2δ)",
        "bayescrl/constrained/acpo_math.py",
        "lam = math.sqrt(quad) / k",
        "lam = math.sqrt(quad) * k",
        f"{T_ACPO_MATH}::test_several_constraints_convex_solve_matches_primal",
    ),
    _one(
        "62-atrpo-lagrangian-direction-sign",
        "ATRPO balanced-Lagrangian direction (1 − ℓ)H⁻¹g + ℓH⁻¹a instead of − ℓH⁻¹a",
        "bayescrl/constrained/atrpo.py",
        "d = (1.0 - ell) * v - ell * w",
        "d = (1.0 - ell) * v + ell * w",
        f"{T_ACPO}::test_lagrangian_step_maximises_balanced_lagrangian_in_trust_region",
    ),
    _one(
        "63-atrpo-dhd-cross-term",
        "ATRPO dᵀHd with + 2ℓ(1 − ℓ) gᵀH⁻¹a instead of −",
        "bayescrl/constrained/atrpo.py",
        "dHd = (1.0 - ell) ** 2 * q - 2.0 * ell",
        "dHd = (1.0 - ell) ** 2 * q + 2.0 * ell",
        f"{T_ACPO}::test_lagrangian_step_maximises_balanced_lagrangian_in_trust_region",
    ),
    _one(
        "64-reward-model-draw-transposed-factor",
        "preference-RL reward posterior draws θ̃ = m + ε L instead of m + ε Lᵀ",
        "bayescrl/prefrl/reward_model.py",
        "return self._mean + z @ chol.mT",
        "return self._mean + z @ chol",
        f"{T_PREF}::test_linear_reward_posterior_draws_have_its_moments",
    ),
    _one(
        "65-reward-model-prior-scale",
        "preference-RL reward prior covariance s I instead of s² I",
        "bayescrl/prefrl/reward_model.py",
        'prior_scale**2 * torch.eye(dim, dtype=torch.float64, device="cpu")',
        'prior_scale * torch.eye(dim, dtype=torch.float64, device="cpu")',
        f"{T_PREF}::test_linear_reward_posterior_draws_have_its_moments",
    ),
    _one(
        "66-diffusion-pspl-draw-transposed-factor",
        "image-experiment PSPL θ draws mean + ε L instead of mean + ε Lᵀ",
        "bayescrl/pbrl/diffusion/agents.py",
        "return mean.unsqueeze(1) + eps @ torch.linalg.cholesky(cov).mT",
        "return mean.unsqueeze(1) + eps @ torch.linalg.cholesky(cov)",
        f"{T_PSPL}::test_diffusion_pspl_theta_draws_have_the_laplace_moments",
    ),
    _one(
        "67-mjx-circle-reward-sign",
        "MJX Circle reward: v^T [y, -x] instead of v^T [-y, x]",
        "bayescrl/envs/mjx/jax_tasks.py",
        "r = (-v[0] * y + v[1] * x)",
        "r = (v[0] * y - v[1] * x)",
        "tests/test_mjx_parity.py::test_point_circle_episode_matches_cpu",
    ),
    _one(
        "68-mjx-reach-hazard-radius",
        "MJX Reach hazard cost radius 1.05 x hazard_size",
        "bayescrl/envs/mjx/jax_tasks.py",
        "<= self.hazard_size",
        "<= 1.05 * self.hazard_size",
        "tests/test_mjx_parity.py::test_point_reach_episode_matches_cpu_and_layouts_follow_its_rules",
    ),
    _one(
        "69-ecop-logged-psi-plain",
        "e-COP's logged penalty argument: the plain surrogate instead of the pessimistic one",
        ECOP,
        '"psi": (upper + gap).tolist()',
        '"psi": (plain + gap).tolist()',
        f"{T_UPD}::test_ecop_logs_the_penalty_argument_after_the_update",
    ),
    _one(
        "70-ecop-control-variate-sign",
        "e-COP penalty control variate added instead of subtracted",
        ECOP,
        "l_c = l_c - h_eff * adv_c[idx].mean(0)",
        "l_c = l_c + h_eff * adv_c[idx].mean(0)",
        f"{T_UPD}::test_ecop_penalty_control_variate_by_hand",
    ),
    _one(
        "71-config-numbers-unchecked",
        "algorithm configs: numeric fields no longer checked by their annotation and RANGES",
        "bayescrl/constrained/core/config.py",
        "kind, value = _NUMERIC.get(f.type), getattr(self, f.name)",
        "kind, value = None, getattr(self, f.name)",
        "tests/test_config_strict.py::test_a_number_outside_its_range_is_refused_and_its_edge_is_kept",
    ),
    _one(
        "72-config-switches-unchecked",
        "configs: fields declared bool no longer checked",
        "bayescrl/utils/checks.py",
        'if f.type in ("bool", bool):',
        'if f.type in ("never",):',
        "tests/test_config_strict.py::test_a_switch_refuses_anything_but_true_or_false",
    ),
    _one(
        "73-config-base-numbers-unchecked",
        "configs: the base's check of int/float fields skipped",
        "bayescrl/utils/checks.py",
        'if kind not in ("int", "float") or (value is None and kind != f.type):',
        "if True:",
        "tests/test_config_strict.py::test_a_number_refuses_strings_nan_lists_and_switches",
    ),
    _one(
        "74-verdicts-welch-normal-quantile",
        "e-COP verdicts: the Welch interval with the normal quantile instead of Student's t",
        "benchmarks/ecop_verdicts.py",
        "h = float(stats.t.ppf(0.975, df)) * se",
        "h = float(stats.norm.ppf(0.975)) * se",
        "tests/test_ecop_verdicts.py::test_welch_by_hand",
    ),
    _one(
        "75-textgen-leader-gap-sign",
        "text-generation table: the leader's paired gap as other − leader instead of leader − other",
        "bayescrl/mopo/textgen/table.py",
        "pr = paired([x for x, _ in both], [y for _, y in both])",
        "pr = paired([y for _, y in both], [x for x, _ in both])",
        "tests/test_mopo_textgen.py::test_table_builder_on_synthetic_runs",
    ),
    _one(
        "76-paired-wilcoxon-one-sided",
        "paired seeds (utils.spread.paired): a one-sided Wilcoxon p-value instead of the two-sided one",
        "bayescrl/utils/spread.py",
        "p = float(wilcoxon(d).pvalue)",
        'p = float(wilcoxon(d, alternative="less").pvalue)',
        "tests/test_spread_paired.py::test_paired_by_hand",
    ),
]


def _copy_repo(dest: Path, worktree: bool) -> None:
    if worktree:
        files = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
        ).stdout.split(b"\0")
        for f in filter(None, files):
            src = ROOT / f.decode()
            if src.is_file():
                (dest / f.decode()).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / f.decode())
        return
    archive = dest / "_head.tar"
    with open(archive, "wb") as fh:
        subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, check=True, stdout=fh)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()


def _pytest(copy: Path, tests: tuple[str, ...]) -> tuple[int, float, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = ["nice", "-n", "10", sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True)
    out = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode, time.perf_counter() - t0, out[-1] if out else ""


def _apply(copy: Path, m: Mutation) -> dict[str, str]:
    """Apply the edits of ``m``; return the original contents to restore."""
    saved: dict[str, str] = {}
    for path, old, new in m.edits:
        p = copy / path
        current = p.read_text()
        saved.setdefault(path, current)
        if current.count(old) != 1:
            raise SystemExit(f"{m.name}: snippet found {current.count(old)} times in {path}: {old!r}")
        p.write_text(current.replace(old, new))
    return saved


def _merge(old: dict, new: dict) -> dict:
    """A partial run (``--only``) updates its mutations' rows of an existing report and keeps the others;
    each row records the source it was run on, and rows of mutations no longer listed are dropped."""
    listed = {m.name for m in MUTATIONS}
    for r in old.get("mutations", []):
        r.setdefault("source", old.get("source"))
    for r in new["mutations"]:
        r["source"] = new["source"]
    rows = {r["name"]: r for r in old.get("mutations", []) if r["name"] in listed}
    rows.update({r["name"]: r for r in new["mutations"]})
    order = [m.name for m in MUTATIONS if m.name in rows]
    merged = [rows[n] for n in order]
    runs = old.get("runs") or [
        {k: old[k] for k in ("source", "baseline", "seconds") if k in old} | {"only": None}
    ]
    only = [r["name"] for r in new["mutations"]]
    runs.append({k: new[k] for k in ("source", "baseline", "seconds")} | {"only": only})
    return {
        "source": "merged (see each row's source and runs)",
        "python": new["python"],
        "runs": runs,
        "mutations": merged,
        "caught": sum(r["status"] == "caught" for r in merged),
        "total": len(merged),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help="names (or name prefixes) of the mutations to run")
    ap.add_argument("--worktree", action="store_true", help="copy the working tree instead of HEAD")
    ap.add_argument("--report", default=str(ROOT / "tools" / "mutation_report.json"))
    args = ap.parse_args()
    todo = [m for m in MUTATIONS if not args.only or any(m.name.startswith(o) for o in args.only)]
    if not todo:
        print("error: --only matches no mutation", file=sys.stderr)
        return 2
    t_start = time.perf_counter()
    # the commit copied (read now: HEAD may move while the mutations run)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bayescrl-mut-") as tmp:
        copy = Path(tmp)
        _copy_repo(copy, args.worktree)
        where = subprocess.run(
            [sys.executable, "-c", "import bayescrl; print(bayescrl.__file__)"],
            cwd=copy,
            env={**os.environ, "PYTHONPATH": str(copy)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not where.startswith(str(copy)):
            print(f"error: the copy does not shadow the installed package ({where})", file=sys.stderr)
            return 2
        all_tests = tuple(dict.fromkeys(t for m in todo for t in m.tests))
        rc, secs, last = _pytest(copy, all_tests)
        baseline = {"tests": list(all_tests), "green": rc == 0, "seconds": round(secs, 1), "summary": last}
        print(f"baseline: {'green' if rc == 0 else 'RED'} ({secs:.0f} s) {last}")
        rows = []
        if rc == 0:
            for m in todo:
                saved = _apply(copy, m)
                try:
                    rc, secs, last = _pytest(copy, m.tests)
                finally:
                    for path, text in saved.items():
                        (copy / path).write_text(text)
                status = "caught" if rc == 1 else ("survived" if rc == 0 else f"error (pytest rc {rc})")
                rows.append(
                    {
                        "name": m.name,
                        "what": m.what,
                        "edits": [{"file": f, "original": o, "mutated": n} for f, o, n in m.edits],
                        "tests": list(m.tests),
                        "status": status,
                        "pytest_summary": last,
                        "seconds": round(secs, 1),
                    }
                )
                print(f"{m.name:32s} {status:10s} {secs:5.0f} s  {last}")
    source = "working tree" if args.worktree else f"HEAD {commit}"
    report = {
        "source": source,
        "python": sys.version.split()[0],
        "baseline": baseline,
        "mutations": rows,
        "caught": sum(r["status"] == "caught" for r in rows),
        "total": len(rows),
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    this_run = (report["caught"], report["total"])
    if args.only and Path(args.report).exists():
        report = _merge(json.loads(Path(args.report).read_text()), report)
    Path(args.report).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"\n{this_run[0]}/{this_run[1]} mutations caught in this run", end="")
    if args.only:
        print(f"; {report['caught']}/{report['total']} in the report", end="")
    print(f"; report: {args.report}")
    ok = baseline["green"] and this_run[0] == this_run[1]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
