"""MOPO on a tiny random GPT-2, local tokenizer: log-probs, reference, lag, heads, training, checkpoints."""

import copy
import json
import math

import pytest
import torch

from bayescrl.mopo import objective as O
from bayescrl.mopo.lm import dual
from bayescrl.mopo.lm.config import MOPOLMConfig
from bayescrl.mopo.lm.data import collate, tokenize
from bayescrl.mopo.lm.model import Policy, lora_policy, sequence_logprobs
from bayescrl.mopo.lm.tiny import TinyTask, build_model, build_tokenizer
from bayescrl.mopo.lm.trainer import MOPOLMTrainer
from bayescrl.utils import ConfigError

LORA = {
    "r": 4,
    "lora_alpha": 8,
    "lora_dropout": 0.0,
    "target_modules": ["c_attn", "c_proj", "c_fc"],
    "fan_in_fan_out": True,
}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def data():
    return TinyTask().make_data(48, seed=3)


@pytest.fixture(scope="module")
def base(tok):
    return build_model(tok, n_layer=2, n_embd=32, n_head=2, seed=1)


def cfg(**kw):
    return MOPOLMConfig(**{"peft": LORA, "batch_size": 4, "steps": 4, "t0": 2, "tau": 0.5, "lr": 1e-2, **kw})


def batch_of(tok, data, idx):
    t = tokenize(data, tok, 64)
    return collate(
        [t.prompt_ids[i] for i in idx] * 2,
        [t.a_ids[i] for i in idx] + [t.b_ids[i] for i in idx],
        tok.pad_token_id,
    )


def perturb_lora(policy, scale=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in policy.named_parameters():
            if "lora_B" in n:
                p.copy_(scale * torch.randn(p.shape, generator=g))


def test_sequence_logprobs_match_unpadded_token_sum(tok, data, base):
    b = batch_of(tok, data, [0, 1, 2])
    logits = base(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
    got = sequence_logprobs(logits, b["input_ids"], b["response_mask"])
    t = tokenize(data, tok, 64)
    for row, i in enumerate([0, 1, 2]):
        ids = torch.tensor([t.prompt_ids[i] + t.a_ids[i]])
        lp = torch.log_softmax(base(input_ids=ids).logits[0], -1)
        n_p = len(t.prompt_ids[i])
        want = sum(lp[j - 1, ids[0, j]] for j in range(n_p, ids.shape[1]))
        assert torch.allclose(got[row], want, atol=1e-4)


def test_reference_is_base_model_with_adapters_disabled(tok, data, base):
    b = batch_of(tok, data, [0, 1, 2, 3])
    frozen = copy.deepcopy(base)
    pol = lora_policy(copy.deepcopy(base), LORA)
    base_lp = sequence_logprobs(
        frozen(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits,
        b["input_ids"],
        b["response_mask"],
    )
    assert torch.allclose(pol.logprobs(b)[0], base_lp, atol=1e-5)  # zero-initialised LoRA
    perturb_lora(pol)
    assert (pol.logprobs(b)[0] - base_lp).abs().max() > 1e-2  # adapters active change the policy ...
    assert torch.allclose(pol.reference_logprobs(b), base_lp, atol=1e-5)  # ... not the reference
    n_base = sum(p.numel() for p in frozen.parameters())
    assert sum(p.numel() for p in pol.parameters()) < 1.5 * n_base  # no second copy of the model


def test_lagged_snapshot_swap_restores_live_weights(tok, data, base):
    b = batch_of(tok, data, [4, 5])
    pol = lora_policy(copy.deepcopy(base), LORA)
    perturb_lora(pol, seed=1)
    snap, before = pol.trainable_state(), pol.logprobs(b).detach()
    perturb_lora(pol, seed=2)
    live = pol.logprobs(b).detach()
    assert not torch.allclose(live, before)
    assert torch.allclose(pol.snapshot_logprobs(snap, b), before, atol=1e-6)
    assert torch.equal(pol.logprobs(b).detach(), live)
    with pytest.raises(ConfigError):
        pol.snapshot_logprobs({"nope": torch.zeros(1)}, b)


def test_multi_head_shares_backbone_and_heads_select_decoding(tok, data, base):
    b = batch_of(tok, data, [0, 1])
    pol = lora_policy(copy.deepcopy(base), LORA, num_heads=3)
    lp = pol.logprobs(b)
    assert lp.shape == (3, 4)
    assert torch.allclose(lp, pol.reference_logprobs(b).expand(3, -1), atol=1e-5)  # heads start at pi_ref
    n_lora = sum(p.numel() for n, p in pol.named_parameters() if "lora_" in n)
    n_head = pol.heads[0].numel()
    assert sum(p.numel() for p in pol.parameters() if p.requires_grad) == n_lora + 3 * n_head
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for h in pol.heads:
            h.copy_(torch.randn(h.shape, generator=g))
    prompt = torch.tensor([tok("q : how do i bake ? a :")["input_ids"]])
    firsts = set()
    for k in range(3):
        out = pol.generate(prompt, torch.ones_like(prompt), head=k, max_new_tokens=1, do_sample=False)
        h = pol.body(input_ids=prompt).last_hidden_state[0, -1]
        assert out[0, -1] == torch.argmax(pol.heads[k] @ h)
        firsts.add(int(out[0, -1]))
    assert len(firsts) > 1
    snap, lp_snap = pol.trainable_state(), pol.logprobs(b).detach()
    with torch.no_grad():
        for h in pol.heads:
            h.mul_(0.5)
    assert torch.allclose(pol.snapshot_logprobs(snap, b), lp_snap, atol=1e-5)  # heads are part of the lag
    assert pol.lm.get_base_model().get_output_embeddings() is pol.base_head  # restored after decoding


def test_mopo_training_decreases_loss_and_logs_dual_state(tok, data, base, tmp_path):
    pol = lora_policy(copy.deepcopy(base), LORA)  # random base: BC must raise the data likelihood
    tr = MOPOLMTrainer(pol, tok, data, cfg(steps=30, t0=10, lr=1e-2), log_path=tmp_path / "log.jsonl")
    fixed = list(range(8))
    b = tr.batch(fixed)

    def fixed_nll():
        with torch.no_grad():
            return -tr.model.logprobs(b).mean().item()

    start = fixed_nll()
    tr.train()
    assert fixed_nll() < start - 0.5  # ~1 nat in practice; random-init LoRA plateaus
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(lines) == 30 and all({"lambda", "b", "chi", "G", "lower_bound"} <= set(r) for r in lines)
    assert len(lines[0]["lambda"][0]) == 2 and all(v >= 0 for r in lines for v in r["lambda"][0])
    assert tr.lag_snapshot is not None and tr.pending_snapshot is not None  # two lag updates happened


def test_pairwise_extraction_moves_log_ratios_towards_rho_star(tok, data, base):
    """extraction="pairwise": the policy's log-ratio gap within each pair moves towards log rho*'s."""
    pol = lora_policy(copy.deepcopy(base), LORA)
    tr = MOPOLMTrainer(
        pol, tok, data, cfg(extraction="pairwise", steps=40, thresholds=[0.0, 0.0], lagged_reference=False)
    )
    idx = list(range(len(data)))
    b = tr.batch(idx)
    p, q = tr._pq(idx)
    log_rho = dual.batch_dual(p, q, torch.zeros(1, 2 * len(idx)), tr.lam, 0.5, with_g=False).log_rho

    def gap_loss():
        with torch.no_grad():
            logp = tr.model.logprobs(b)
            ref = tr.model.reference_logprobs(b)
        return O.pairwise_extraction_loss(logp, ref.unsqueeze(0), log_rho).item()

    start = gap_loss()
    assert start == pytest.approx(math.log(2), abs=1e-5)  # LoRA starts at zero: pi_psi = pi_ref, z = 0
    log = tr.train()
    assert gap_loss() < start - 0.05 and all(r["lambda"] == [[0.0, 0.0]] for r in log)
    # multi-head with the lagged reference: per-head targets relative to pi_lag, (H, 2M) throughout
    pol3 = lora_policy(copy.deepcopy(base), LORA, num_heads=3)
    heads = MOPOLMTrainer(pol3, tok, data, cfg(extraction="pairwise", multi_head=True, steps=6, t0=2))
    rec = heads.train()
    assert heads.lag_snapshot is not None and all(math.isfinite(r["loss"]) for r in rec)
    assert len(rec[-1]["lambda"]) == 3


def test_lambda_responds_to_thresholds(tok, data, base):
    strict = MOPOLMTrainer(lora_policy(copy.deepcopy(base), LORA), tok, data, cfg(thresholds=[1.0, 1.0]))
    loose = MOPOLMTrainer(lora_policy(copy.deepcopy(base), LORA), tok, data, cfg(thresholds=[0.0, 0.0]))
    strict.train(3)
    loose.train(3)
    assert (strict.lam > 0).all() and (loose.lam == 0).all()
    assert torch.equal(strict.b, torch.ones(1, 2))  # fixed thresholds are never adapted


def test_adaptive_thresholds_start_at_beta_times_half(tok, data, base):
    tr = MOPOLMTrainer(lora_policy(copy.deepcopy(base), LORA), tok, data, cfg(beta=[0.8, 0.6]))
    assert torch.allclose(tr.b, torch.tensor([[0.4, 0.3]]))  # G(rho^(0)) = 1/2 after the augmentation


def test_dpo_first_step_loss_is_log_two(tok, data, base):
    pairs = data.dpo_pairs().as_preference_data()
    tr = MOPOLMTrainer(lora_policy(copy.deepcopy(base), LORA), tok, pairs, cfg(method="dpo"))
    assert tr.step()["loss"] == pytest.approx(torch.log(torch.tensor(2.0)).item(), abs=1e-6)
    with pytest.raises(ConfigError):
        MOPOLMTrainer(lora_policy(copy.deepcopy(base), LORA), tok, data, cfg(method="dpo"))


def test_checkpoint_reload_gives_identical_logprobs_and_resumes(tok, data, base, tmp_path):
    tr = MOPOLMTrainer(
        lora_policy(copy.deepcopy(base), LORA, num_heads=3),
        tok,
        data,
        cfg(multi_head=True, epsilon=0.1, steps=3),
    )
    tr.train()
    tr.save_checkpoint(tmp_path / "ck")
    b = tr.batch(list(range(6)))
    back = MOPOLMTrainer.from_checkpoint(tmp_path / "ck", copy.deepcopy(base), tok, data)
    with torch.no_grad():
        assert torch.equal(back.model.logprobs(b), tr.model.logprobs(b))
    assert torch.equal(back.lam, tr.lam) and torch.equal(back.chi, tr.chi) and back.step_count == 3
    r1, r2 = tr.step(), back.step()  # same data order, optimiser state and lag snapshot
    assert r1["lambda"] == r2["lambda"] and r1["loss"] == pytest.approx(r2["loss"], rel=1e-5)
    with pytest.raises(Exception, match="heads.pt"):
        Policy.load(copy.deepcopy(base), tmp_path)


def test_accelerate_single_process(tok, data, base):
    accelerate = pytest.importorskip("accelerate")
    acc = accelerate.Accelerator(cpu=True)
    tr = MOPOLMTrainer(lora_policy(copy.deepcopy(base), LORA), tok, data, cfg(), accelerator=acc)
    assert tr.step()["step"] == 1


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="train.nope"):
        MOPOLMConfig.from_dict({"nope": 1})
    with pytest.raises(ConfigError, match="tau"):
        MOPOLMConfig(tau=0)
    with pytest.raises(ConfigError, match=r"thresholds\[1\]"):
        MOPOLMConfig(thresholds=[0.5, 1.5])
    with pytest.raises(ConfigError, match="extraction.*'ratio'"):
        MOPOLMConfig(extraction="ratio")
    assert MOPOLMConfig().torch_dtype("cpu") == torch.float32  # auto: bf16 only on CUDA
    assert MOPOLMConfig(dtype="bfloat16").torch_dtype("cpu") == torch.bfloat16


def test_batch_dual_weights_are_the_closed_form():
    from bayescrl.mopo.lm import dual

    prefs = torch.tensor([[1, 0, 1], [0, 0, 1], [1, 1, 0]])
    ind = dual.augment(prefs)
    assert ind.tolist() == [[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]]
    p, q = dual.split_heads(ind, torch.tensor([2, 0]))
    assert p[1].tolist() == [1, 0, 1, 0, 1, 0] and q[1, :, 0].tolist() == [0, 0, 1, 1, 1, 0]
    lam, tau = torch.tensor([[0.5, 2.0], [1.0, 0.0]]), 0.7
    ell = torch.tensor([[0.0, 0.3, -0.2, 0.1, 0.0, -1.0], [0.0] * 6])
    d = dual.batch_dual(p, q, ell, lam, tau)
    s = p + (q * lam[:, None, :]).sum(-1)  # Eq. `empirical-dual` exponent, per atom
    u = torch.exp(ell + s / tau)
    u = u / u.mean(-1, keepdim=True)  # pi* ∝ pi_lag * rho*, relative to the data
    assert torch.allclose(d.u, u, atol=1e-5)
    assert torch.allclose(d.g, (u[..., None] * q).mean(1), atol=1e-5)
    w = torch.softmax(ell, -1)
    assert torch.allclose((w * torch.exp(d.log_rho)).sum(-1), torch.ones(2), atol=1e-5)  # E_lag[rho*] = 1
    assert torch.allclose(dual.lower_bounds(d, q, torch.ones(2, 2), 0.0), d.g)
    lb = dual.lower_bounds(d, q, torch.ones(2, 2), 0.2)
    assert (lb < d.g).all()  # a lower bound strictly below G for eps > 0
    lam2 = dual.lambda_step(lam, d.g, torch.full((2, 2), 0.9), lr=0.1)
    assert torch.allclose(lam2, (lam - 0.1 * (d.g - 0.9)).clamp_min(0))


def test_run_lm_end_to_end_small(tmp_path, monkeypatch):
    from bayescrl.mopo.lm import run_lm

    config = {
        "mode": "lm",
        "seed": 0,
        "data": {"n_train": 48, "n_eval_prompts": 8},
        "model": {"n_embd": 32, "sft_steps": 10},
        "train": {"steps": 3, "t0": 2, "batch_size": 4, "tau": 0.5},
        "sweep": {"thresholds": [[0.6, 0.6]]},
        "scalarise_weights": [[1, 1, 1]],
    }
    res = run_lm(config, tmp_path)
    assert {"reference", "mopo", "mopo_b0", "mopo_lb", "dpo_joint", "dpo_scalarised_0"} <= set(res["runs"])
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["pareto"]["families"]["mopo"]["reference_point"] == [0.0, 0.0]
    for name in (
        "lengths.png",
        "pareto.png",
        "dual_trace.png",
        "checkpoint_mopo/state.pt",
        "base/config.json",
    ):
        assert (tmp_path / name).exists()
    # a run does not depend on which runs came before it in the same process (sampling may stop early at
    # EOS, so an evaluation consumes a model-dependent number of random draws: simulated here)
    from bayescrl.mopo.lm import run as run_mod

    real, calls = run_mod.generate, []

    def generate_then_draw(*args, **kwargs):
        calls.append(1)
        out = real(*args, **kwargs)
        torch.rand(17 * len(calls))
        return out

    monkeypatch.setattr(run_mod, "generate", generate_then_draw)
    after = run_lm({**config, "methods": ["mopo", "dpo_joint"]}, tmp_path / "after")["runs"]["dpo_joint"]
    alone = run_lm({**config, "methods": ["dpo_joint"]}, tmp_path / "alone")["runs"]["dpo_joint"]
    assert alone["final"] == after["final"] and alone["lengths"] == after["lengths"]
    with pytest.raises(ConfigError, match="methods"):
        run_lm({**config, "methods": ["ppo"]}, tmp_path)


def test_implicit_accuracy_known_answer(tok, data, base):
    from bayescrl.mopo.lm.evaluate import implicit_accuracy

    pol = lora_policy(
        copy.deepcopy(base), LORA
    )  # = pi_ref: every implicit margin is 0, "a better" never holds
    acc = implicit_accuracy(pol, tok, data.subset(range(12)), max_length=64)
    assert acc == pytest.approx((data.prefs[:12] == 0).float().mean(0).tolist())


def test_response_positions_only_match_full_logits(tok, data, base):
    b = batch_of(tok, data, [0, 3, 5])
    full = {k: v for k, v in b.items() if k != "response_pos"}  # without the positions: every one scored
    t = b["input_ids"].shape[1]
    want = [
        r * t + j - 1 for r in range(b["input_ids"].shape[0]) for j in range(1, t) if b["response_mask"][r, j]
    ]
    assert b["response_pos"].tolist() == want
    for heads in (1, 3):
        pol = lora_policy(copy.deepcopy(base), LORA, num_heads=heads)
        perturb_lora(pol)
        assert torch.allclose(pol.logprobs(b), pol.logprobs(full), atol=1e-5)
        assert torch.allclose(pol.reference_logprobs(b), pol.reference_logprobs(full), atol=1e-5)
    lp = pol.logprobs(b)
    lp.sum().backward()  # gradients flow through the gathered positions
    assert all(p.grad is not None for p in pol.heads)


def test_fast_adapter_disable_equals_peft_disable_adapter(tok, data, base):
    b = batch_of(tok, data, [1, 2])
    pol = lora_policy(copy.deepcopy(base), LORA)
    perturb_lora(pol)
    with torch.no_grad(), pol.lm.disable_adapter():
        want = pol.logprobs(b)
    grads = {n: p.requires_grad for n, p in pol.named_parameters()}
    assert torch.equal(pol.reference_logprobs(b), want[0])
    assert all(not m._disable_adapters for m in pol._tuner_layers())  # restored
    assert grads == {n: p.requires_grad for n, p in pol.named_parameters()}  # untouched


def test_merged_lag_pass_equals_lora_pass(tok, data, base):
    b = batch_of(tok, data, [4, 5, 6])
    pol = lora_policy(copy.deepcopy(base), LORA, num_heads=2)
    perturb_lora(pol, seed=1)
    snap, before = pol.trainable_state(), pol.logprobs(b).detach()
    perturb_lora(pol, seed=2)
    live = pol.logprobs(b).detach()
    weights = [p.detach().clone() for p in pol.parameters()]
    merged = pol.merge_snapshot(snap)
    assert merged is not None and len(merged) == 8  # c_attn, c_proj, c_fc, mlp c_proj in 2 layers
    got = pol.snapshot_logprobs(snap, b, merged)
    assert torch.allclose(got, before, atol=1e-4) and not torch.allclose(got, live, atol=1e-2)
    assert all(torch.equal(p, w) for p, w in zip(pol.parameters(), weights, strict=True))  # restored
    assert torch.equal(pol.logprobs(b).detach(), live)
    assert pol.merge_snapshot(snap, max_mb=0) is None  # off
    assert pol.merge_snapshot(snap, max_mb=1e-3) is None  # copy larger than the limit
    bf16 = lora_policy(copy.deepcopy(base).to(torch.bfloat16), LORA)
    assert bf16.merge_snapshot(bf16.trainable_state()) is None  # would round the deltas away
    dora = lora_policy(copy.deepcopy(base), {**LORA, "use_dora": True})
    assert dora.merge_snapshot(dora.trainable_state()) is None  # LoRA variants keep the plain swap


def test_chi_step_gradient_matches_autograd():
    from bayescrl.mopo import objective as obj
    from bayescrl.mopo.lm import dual

    g = torch.Generator().manual_seed(0)
    p, q = dual.split_heads(dual.augment((torch.rand(6, 3, generator=g) > 0.5).long()), torch.tensor([2, 0]))
    d = dual.batch_dual(p, q, torch.randn(2, 12, generator=g), torch.rand(2, 2, generator=g), 0.5)
    chi = torch.tensor([[0.3, 1.0], [2.0, float("inf")]])
    x = torch.exp(d.log_rho).unsqueeze(-1) * q
    c = chi.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(obj.chi_loss(x, c, 0.2, weight=d.w_lag).sum(), c)
    want = (chi - 0.1 * grad).clamp_min(1e-3)
    assert torch.allclose(dual.chi_step(chi, d, q, 0.2, 0.1), want, atol=1e-6)
    assert torch.isinf(dual.chi_step(chi, d, q, 0.2, 0.1)[1, 1])  # chi = inf: constant LB, no step


def test_threshold_batches_are_trained_next_and_reuse_their_passes(tok, data, base):
    tr = MOPOLMTrainer(
        lora_policy(copy.deepcopy(base), LORA),
        tok,
        data,
        cfg(t0=3, threshold_batches=2, cache_logprobs=False),
    )
    drawn, passes = [], {"ref": 0, "lag": 0}
    draw, ref_fn, lag_fn = tr._draw, tr.model.reference_logprobs, tr.model.snapshot_logprobs

    def count(key, fn):
        def wrapped(*a, **k):
            passes[key] += 1
            return fn(*a, **k)

        return wrapped

    tr._draw = lambda: drawn.append(draw()) or drawn[-1]
    tr.model.reference_logprobs = count("ref", ref_fn)
    tr.model.snapshot_logprobs = count("lag", lag_fn)
    tr.train(12)  # one epoch: 48 records, batch 4
    assert sorted(i for d in drawn for i in d.idx) == list(range(48))  # threshold batches are not skipped
    assert len(tr._ahead) == 2  # drawn at the update of step 12 for steps 13-14
    assert passes["ref"] == 12 + 2  # one pi_ref pass per drawn batch, none repeated
    # lag active from the update at step 6: steps 7-12 and the 2 batches drawn ahead at step 12
    assert passes["lag"] == 6 + 2


@pytest.mark.parametrize("num_heads", [1, 2])
def test_left_padded_generation_matches_unpadded(tok, base, num_heads):
    """evaluate.generate left-pads prompts: positions and masks must make that invisible (a transformers /
    peft version that stops deriving position ids from the mask would shift every shorter prompt)."""
    pol = lora_policy(copy.deepcopy(base), LORA, num_heads=num_heads)
    perturb_lora(pol)
    pol.eval()
    long, short = tok("q : how do i bake ? a :")["input_ids"], tok("q : bake ? a :")["input_ids"]
    pad, n = tok.pad_token_id, len(long) - len(short)
    ids = torch.tensor([long, [pad] * n + short])
    mask = torch.tensor([[1] * len(long), [0] * n + [1] * len(short)])
    kw = dict(max_new_tokens=3, do_sample=False, output_scores=True, return_dict_in_generate=True)
    kw |= dict(pad_token_id=pad, eos_token_id=tok.eos_token_id)
    head = num_heads - 1
    both = pol.generate(ids, mask, head=head, **kw)
    for row, prompt in enumerate([long, short]):
        p = torch.tensor([prompt])
        solo = pol.generate(p, torch.ones_like(p), head=head, **kw)
        for s_both, s_solo in zip(both.scores, solo.scores, strict=True):
            assert torch.allclose(s_both[row], s_solo[0], atol=1e-4)
        assert both.sequences[row, ids.shape[1] :].tolist() == solo.sequences[0, p.shape[1] :].tolist()


def test_generate_temperature(tok, base):
    """A vanishing temperature samples the argmax (greedy decoding); temperature 1 is the policy itself."""
    from bayescrl.mopo.lm.evaluate import generate

    pol = lora_policy(copy.deepcopy(base), LORA)
    perturb_lora(pol)
    prompts = ["q : how do i bake ? a :", "q : bake ? a :"]
    greedy = generate(pol, tok, prompts, max_new_tokens=6, do_sample=False)
    cold = [generate(pol, tok, prompts, max_new_tokens=6, seed=s, temperature=1e-4) for s in range(3)]
    assert all(c == greedy for c in cold)
    hot = {tuple(generate(pol, tok, prompts, max_new_tokens=6, seed=s)) for s in range(6)}
    assert len(hot) > 1  # temperature 1 does sample
    with pytest.raises(ValueError, match="temperature = 0"):
        generate(pol, tok, prompts, temperature=0.0)


def _lb_problem():
    from bayescrl.mopo.tabular import parse_tabular
    from bayescrl.utils import load_yaml

    cfg_ = load_yaml("examples/mopo/tabular_mopo_lb.yaml")
    problem = parse_tabular(cfg_)
    p_hat, q_hat = (t.double() for t in problem.action_scores(True))
    return cfg_, problem, p_hat, q_hat, problem.ref.double()


def test_barrier_lagrangian_gradient_is_the_thesis_formula():
    """dL_LB/dlog pi = dF + sum_k lam_k dG_k with lam_k = sigma/max(G_k - b_k, sigma^2)
    (Eq. `log-barrier-objective-grad`), on atoms = actions with weight pi_ref (a tabular case)."""
    _, _, p, q, ref = _lb_problem()
    b, tau = torch.tensor([0.75], dtype=torch.float64), 1.0
    for sigma in (1.0, 0.05):  # constraint inactive, then active (slope 1/sigma)
        logits = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64, requires_grad=True)
        rel = torch.log_softmax(logits, -1) - torch.log(ref)
        sig = torch.tensor([sigma], dtype=torch.float64)
        lb, g = dual.barrier_lagrangian(rel, p, q, ref, b, sig, tau)
        (grad,) = torch.autograd.grad(lb, logits)
        # hand-written: pi = softmax(logits); F = E_pi[p] - tau KL(pi||ref); G = E_pi[q]
        pi = torch.softmax(logits, -1).detach()
        jac = torch.diag(pi) - pi[:, None] * pi[None, :]  # d pi / d logits
        df = jac @ (p - tau * (torch.log(pi / ref) + 1))
        lam = sig / torch.maximum(g.detach() - b, sig**2)
        want = df + lam * (jac @ q[:, 0])
        assert torch.allclose(grad, want, atol=1e-10)
        assert torch.allclose(g.detach(), pi @ q)


def test_barrier_ascent_agrees_with_the_tabular_solver():
    """The LM mopo-lb update (Adam ascent on dual.barrier_lagrangian, sigma^(t) = max(gamma^t sigma0,
    sigma_min)) on a tabular case takes the same steps as the tabular reference run_mopo_lb (full batch)."""
    from bayescrl.mopo.tabular import run_mopo_lb

    cfg_, problem, p, q, ref = _lb_problem()
    b, tau = torch.tensor(cfg_["b"], dtype=torch.float64), float(cfg_["tau"])
    steps, lr, gamma, sigma_min = 150, 0.05, 0.96, 1e-3
    psi = torch.log(ref).clone().requires_grad_(True)
    opt = torch.optim.Adam([psi], lr=lr)
    for t in range(1, steps + 1):
        sig = O.sigma_schedule(1.0, gamma, t).double().clamp_min(sigma_min).reshape(1)
        lb, _ = dual.barrier_lagrangian(torch.log_softmax(psi, -1) - torch.log(ref), p, q, ref, b, sig, tau)
        opt.zero_grad()
        (-lb).backward()
        opt.step()
    ours = torch.softmax(psi, -1).detach()
    tab = run_mopo_lb(
        problem, tau, b, steps=steps, lr=lr, batch=None, sigma0=1.0, gamma=gamma, sigma_min=sigma_min
    )
    assert torch.allclose(ours, tab.policy[0].double(), atol=1e-6), (ours, tab.policy)
    assert float(ours @ q[:, 0]) > float(b)  # the barrier keeps the iterate strictly feasible
