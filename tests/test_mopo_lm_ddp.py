"""MOPO LM under DDP: 2 CPU processes (gloo, accelerate) match one process on the same global batch."""

import copy
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from bayescrl.mopo.lm.config import MOPOLMConfig
from bayescrl.mopo.lm.model import lora_policy
from bayescrl.mopo.lm.tiny import TinyTask, build_model, build_tokenizer
from bayescrl.mopo.lm.trainer import MOPOLMTrainer

pytest.importorskip("accelerate")

LORA = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["c_attn"], "fan_in_fan_out": True}
METHODS = {  # lag updates (t0 = 2) and threshold re-estimation inside the 4 steps; chi active (eps > 0)
    "mopo": {"method": "mopo", "epsilon": 0.1},
    "mopo-lb": {"method": "mopo-lb", "sigma_decay": 0.5, "sigma_min": 0.05},
}


def _cfg(batch_size, **kw):
    return MOPOLMConfig(
        **{
            "peft": LORA,
            "steps": 4,
            "t0": 2,
            "tau": 0.5,
            "lr": 2e-2,
            "lr_lambda": 4.0,
            "threshold_batches": 2,
        }
        | {"batch_size": batch_size, **kw}
    )


def _train(batch_size, accelerator=None):
    torch.manual_seed(0)
    tok = build_tokenizer()
    data = TinyTask().make_data(16, seed=3)
    base = build_model(tok, n_layer=1, n_embd=16, n_head=2, seed=1)
    out = {}
    for name, kw in METHODS.items():
        torch.manual_seed(0)
        policy = lora_policy(copy.deepcopy(base), LORA)
        tr = MOPOLMTrainer(policy, tok, data, _cfg(batch_size, **kw), accelerator=accelerator)
        tr.train()
        out[name] = {
            "params": torch.cat(
                [p.detach().flatten().cpu() for p in tr.model.parameters() if p.requires_grad]
            ),
            "lam": tr.lam.clone(),
            "chi": tr.chi.clone(),
            "b": tr.b.clone(),
        }
    return out


def _worker(rank, world, port, folder):
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        OMP_NUM_THREADS="1",
    )
    torch.set_num_threads(1)
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)  # forked: drop the parent's 1-process state
    acc = Accelerator(cpu=True)
    assert acc.num_processes == world
    torch.save(_train(2, acc), os.path.join(folder, f"rank{rank}.pt"))
    acc.wait_for_everyone()
    torch.distributed.destroy_process_group()


def test_two_processes_stay_identical_and_match_one_process_on_the_global_batch(tmp_path):
    torch.set_num_threads(1)
    one = _train(4)  # one process, batch of 4 records = the 2 x 2 records of the two processes
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # fork: the workers inherit the imported transformers/peft (spawning re-imports them, ~10x slower)
    mp.start_processes(_worker, args=(2, port, str(tmp_path)), nprocs=2, join=True, start_method="fork")
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    for name in METHODS:
        for key in ("params", "lam", "chi", "b"):
            assert torch.equal(r0[name][key], r1[name][key]), (name, key)  # every rank, the same step
            assert torch.allclose(r0[name][key], one[name][key], atol=1e-5, rtol=1e-4), (name, key)
        assert (r0[name]["params"] != 0).any()  # LoRA B started at 0: training moved it
    assert (one["mopo"]["lam"] > 0).any()  # the multipliers took part
