"""Two CPU processes with DistributedDataParallel compute the single-process gradient, and
the training command runs under ``torchrun``."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from transformer_ref.data.batching import collate
from transformer_ref.data.datasets import synthetic_pairs
from transformer_ref.modules import make_model
from transformer_ref.training.loop import backward_step, shard
from transformer_ref.training.losses import LabelSmoothingLoss

PAIRS = synthetic_pairs("reverse", 7, max_len=8, seed=4)  # odd count: unequal shards
N_TOKENS = sum(len(tgt) for _, tgt in PAIRS)


def build():
    torch.manual_seed(0)
    return make_model(14, 14, N=1, d_model=16, d_ff=32, h=2, dropout=0.0)


def loss_fn():
    return LabelSmoothingLoss(14, smoothing=0.1, reduction="sum")


def worker(rank: int, world_size: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        model = DistributedDataParallel(build())
        mine = [PAIRS[i] for i in shard(list(range(len(PAIRS))), rank, world_size)]
        backward_step(model, collate(mine), loss_fn(), global_tokens=N_TOKENS,
                      world_size=world_size)
        grads = {n: p.grad for n, p in model.module.named_parameters()}
        torch.save(grads, os.path.join(out_dir, f"grads{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_ddp_gradients_match_single_process(tmp_path, free_port):
    mp.spawn(worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)

    model = build()
    backward_step(model, collate(PAIRS), loss_fn(), global_tokens=N_TOKENS)
    # The same quantity written directly: the mean smoothed loss over the whole batch.
    reference = build()
    batch = collate(PAIRS)
    logits = reference(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)
    LabelSmoothingLoss(14, smoothing=0.1)(logits, batch.tgt_out).backward()

    for rank in range(2):
        grads = torch.load(tmp_path / f"grads{rank}.pt")
        for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7, msg=name)
            torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_training_command_under_torchrun_uses_both_processes(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    out = tmp_path / "run"
    command = [str(torchrun), "--standalone", "--nproc_per_node=2", "-m", "transformer_ref.train",
               "--task", "reverse", "--preset", "cpu", "--device", "cpu", "--max-steps", "4",
               "--eval-every", "2", "--out", str(out), "--no-progress"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "processes 2" in result.stdout
    report = json.loads((out / "metrics.json").read_text())
    assert (report["processes"], report["steps"]) == (2, 4)
    # Only the main process evaluates and writes: one history entry per evaluation.
    assert [entry["step"] for entry in report["history"]] == [2, 4]
    assert (out / "checkpoint.pt").is_file()
