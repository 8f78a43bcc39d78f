"""A readable training loop for the encoder-decoder Transformer.

One optimizer step:

1. take the next global batch of examples (grouped by length, ``max_tokens`` padded tokens);
   under DDP each process takes its share of it;
2. forward under autocast (bfloat16 on recent GPUs, float16 + GradScaler on older ones,
   float32 on the CPU), label-smoothed loss *summed* over the real target tokens and divided
   by the global batch's token count, backward;
3. clip the gradient norm, Adam step (betas 0.9/0.98, eps 1e-9), learning-rate step (the
   Noam warm-up, then inverse-square-root or linear decay).

Every ``eval_every`` steps an evaluation callback runs on the main process; it can stop
training early (e.g. when held-out exact match reaches 100%). Checkpoints hold everything
needed to resume exactly where training left off.

Multi-GPU: start the same command with ``torchrun --nproc_per_node=K``; :func:`init_distributed`
joins the process group and :func:`fit` wraps the model in DistributedDataParallel.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from transformer_ref.batching import Batch, bucket_by_tokens, collate
from transformer_ref.checkpoint import (
    load_checkpoint,
    restore_training_state,
    save_checkpoint,
    unwrap,
)
from transformer_ref.device import autocast_dtype, make_grad_scaler, resolve_device
from transformer_ref.losses import LabelSmoothingLoss
from transformer_ref.progress import TimeLeft
from transformer_ref.schedule import make_lr_lambda
from transformer_ref.vocab import PAD_ID

Pair = tuple[list[int], list[int]]


@dataclass
class TrainConfig:
    """Optimisation settings (model settings live in ``make_model``'s arguments).

    Attributes:
        max_steps: optimizer steps to take at most.
        max_tokens: padded tokens per global batch (summed over all DDP processes).
        warmup: Noam warm-up steps.
        lr_factor: Noam ``factor`` (peak rate is ``factor * (d_model * warmup)^-0.5``).
        decay: after the warm-up, ``"inverse_sqrt"`` (the paper's Noam schedule) or
            ``"linear"`` (down to 0 at ``max_steps``).
        smoothing: label smoothing ``eps``.
        clip_norm: gradient-norm clipping threshold, None for no clipping.
        eval_every: run the evaluation callback every this many steps (0: only at the end).
        save_every: save a checkpoint every this many steps (0: only at the end).
        max_minutes: optional cap on training time (evaluation excluded, earlier runs included
            on resume); a run that reaches it stops before ``max_steps`` and says so. None (the
            presets' choice): no cap, so the same settings give the same model anywhere.
        seed: seeds batching order (and, through :func:`seed_everything`, initialisation).
        amp: use autocast on CUDA.
        sort_by_length: batch similar lengths together (see ``bucket_by_tokens``).
    """

    max_steps: int
    max_tokens: int
    warmup: int = 4000
    lr_factor: float = 1.0
    decay: str = "inverse_sqrt"
    smoothing: float = 0.1
    clip_norm: float | None = 1.0
    eval_every: int = 0
    save_every: int = 0
    max_minutes: float | None = None
    seed: int = 0
    amp: bool = True
    sort_by_length: bool = True

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_tokens", "warmup"):
            if getattr(self, name) <= 0:
                raise ValueError(f"TrainConfig.{name} must be positive, got {getattr(self, name)}")
        if self.decay not in ("inverse_sqrt", "linear"):
            raise ValueError(
                f"TrainConfig.decay must be 'inverse_sqrt' or 'linear', got {self.decay!r}"
            )


@dataclass
class TrainResult:
    """What :func:`fit` reports.

    Attributes:
        step: optimizer steps taken in all (earlier runs included on resume).
        train_seconds: time spent in training steps, evaluation excluded.
        tokens, tokens_per_second: target tokens trained on, and their rate.
        metrics: the last evaluation's metrics.
        history: one dict per evaluation (those of resumed runs first): ``step``,
            ``train_seconds`` (so far), ``train_loss`` (recent mean) and the evaluation's
            metrics.
        stopped_early: ``stop_when`` or the time cap ended training before ``max_steps``.
        stop_reason: why training ended early, in words (None when it ran ``max_steps``).
    """

    step: int
    train_seconds: float
    tokens: int
    tokens_per_second: float
    metrics: dict[str, float] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    stopped_early: bool = False
    stop_reason: str | None = None


# ---------------------------------------------------------------------------------------------
# Processes and seeds


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in a (possibly single-process) job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device_spec: str = "auto") -> tuple[DistInfo, torch.device]:
    """Join the torchrun process group when ``WORLD_SIZE > 1``; pick this process's device.

    Uses NCCL with one GPU per process (``cuda:LOCAL_RANK``) when CUDA is used, and gloo on
    the CPU. In a plain single process it only resolves ``device_spec``.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    device = resolve_device(device_spec)
    if world_size <= 1:
        return DistInfo(), device
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank), device


def cleanup_distributed() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) so runs repeat."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ---------------------------------------------------------------------------------------------
# Batches


def shard(indices: list[int], rank: int, world_size: int) -> list[int]:
    """This process's share of a global batch: every ``world_size``-th example from ``rank``."""
    return indices[rank::world_size]


def pair_length(pair: Pair) -> int:
    """Padded length an example occupies in a batch (the longer of source and target)."""
    return max(len(pair[0]), len(pair[1]))


def global_batches(
    pairs: list[Pair], max_tokens: int, *, seed: int, epoch: int, sort_by_length: bool = True
) -> list[list[int]]:
    """The shuffled global batches (lists of example indices) of one epoch."""
    lengths = [pair_length(p) for p in pairs]
    return bucket_by_tokens(lengths, max_tokens, shuffle=True, seed=seed * 100_003 + epoch,
                            sort_by_length=sort_by_length)


def iterate_batches(
    pairs: list[Pair],
    max_tokens: int,
    *,
    seed: int,
    dist_info: DistInfo,
    start: tuple[int, int] = (0, 0),
    sort_by_length: bool = True,
) -> Iterator[tuple[tuple[int, int], Batch, int]]:
    """Endless stream of ``((epoch, index), local_batch, global_target_tokens)``.

    ``(epoch, index)`` is the position just *after* the yielded batch, so a checkpoint that
    stores it resumes with the next batch. Under DDP, global batches with fewer examples than
    processes are skipped (every process must take part in every step).
    """
    epoch, skip = start
    while True:
        batches = global_batches(pairs, max_tokens, seed=seed, epoch=epoch,
                                 sort_by_length=sort_by_length)
        if not batches:
            raise ValueError("no training pairs: the training set is empty")
        for index in range(skip, len(batches)):
            indices = batches[index]
            if len(indices) < dist_info.world_size:
                continue
            local = shard(indices, dist_info.rank, dist_info.world_size)
            n_tokens = sum(len(pairs[i][1]) for i in indices)
            yield (epoch, index + 1), collate([pairs[i] for i in local], PAD_ID), n_tokens
        epoch, skip = epoch + 1, 0


# ---------------------------------------------------------------------------------------------
# One step


def make_optimizer(
    model: nn.Module,
    d_model: int,
    warmup: int,
    factor: float = 1.0,
    *,
    decay: str = "inverse_sqrt",
    total_steps: int = 0,
) -> tuple[torch.optim.Adam, torch.optim.lr_scheduler.LambdaLR]:
    """Adam with the paper's settings and a warm-up schedule (base lr 1.0, scaled by the lambda).

    ``decay`` picks what follows the warm-up (see :func:`transformer_ref.schedule.make_lr_lambda`);
    ``"linear"`` reaches 0 at ``total_steps``.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    rate = make_lr_lambda(decay, d_model, warmup, total_steps, factor)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    return optimizer, scheduler


def backward_step(
    model: nn.Module,
    batch: Batch,
    loss_sum_fn: LabelSmoothingLoss,
    *,
    global_tokens: int,
    world_size: int = 1,
    amp_dtype: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
) -> torch.Tensor:
    """Forward and backward for one (local) batch; returns the detached summed loss.

    ``loss_sum_fn`` must use ``reduction="sum"``. DDP averages gradients over processes, so
    each process scales its summed loss by ``world_size / global_tokens``: the averaged
    gradient is then exactly the gradient of the mean loss over the whole global batch, the
    same as one process computing it on all examples.
    """
    if loss_sum_fn.reduction != "sum":
        raise ValueError("backward_step needs a LabelSmoothingLoss with reduction='sum'")
    device = batch.src.device
    with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)
    loss_sum = loss_sum_fn(logits, batch.tgt_out)
    scaled = loss_sum * (world_size / global_tokens)
    (scaler.scale(scaled) if scaler is not None else scaled).backward()
    return loss_sum.detach()


def optimizer_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    scaler: torch.amp.GradScaler,
    clip_norm: float | None,
) -> None:
    """Clip (on unscaled gradients), step the optimizer and the schedule, clear gradients."""
    if clip_norm is not None:
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


# ---------------------------------------------------------------------------------------------
# The loop


def _all_agree(flag: bool, dist_info: DistInfo, device: torch.device) -> bool:
    """True if any process says True (so every process stops at the same step)."""
    if not dist_info.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def fit(
    model: nn.Module,
    train_pairs: list[Pair],
    config: TrainConfig,
    *,
    device: torch.device,
    evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
    stop_when: Callable[[dict[str, float]], bool] | None = None,
    checkpoint_path: str | Path | None = None,
    resume: bool = False,
    task: str | None = None,
    tokenizer: str | None = None,
    extra: dict[str, Any] | None = None,
    dist_info: DistInfo | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    report_every: int | None = None,
    on_report: Callable[[dict[str, float]], None] | None = None,
) -> TrainResult:
    """Train ``model`` (built by ``make_model``) on ``train_pairs``.

    Args:
        model: the model, on ``device``.
        train_pairs: ``(src_ids, tgt_ids)`` lists, both ending with EOS.
        config: optimisation settings.
        device: where the model lives.
        evaluate: called with the plain model in eval mode every ``config.eval_every`` steps
            and at the end, on the main process; returns metrics. Each call adds its metrics to
            ``history`` with the step and the training seconds so far (``train_seconds``).
        stop_when: given those metrics, returns True to stop early.
        checkpoint_path: where to save (every ``save_every`` steps and at the end).
        resume: continue from ``checkpoint_path`` (model, optimizer, schedule, step, random
            state and data position).
        task, tokenizer, extra: stored in the checkpoint.
        dist_info: process placement (default: a single process).
        progress: show a tqdm bar when stderr is a terminal; elsewhere (a notebook, a log
            file) write a progress line through ``log`` every ``report_every`` steps instead,
            so a long run is never silent.
        log: where progress and evaluation lines go.
        report_every: steps between progress reports (default: a twentieth of the steps to
            take, at least 1).
        on_report: called on the main process at each progress report with ``step``,
            ``train_loss`` (mean of the steps since the last report), ``train_seconds``,
            ``lr`` and ``max_steps``, e.g. to draw a live loss curve.

    Returns:
        A :class:`TrainResult`; ``metrics`` are the last evaluation's.
    """
    dist_info = dist_info or DistInfo()
    plain = unwrap(model)
    if dist_info.enabled:
        model = DistributedDataParallel(
            plain, device_ids=[device.index] if device.type == "cuda" else None
        )
    amp_dtype = autocast_dtype(device) if config.amp else None
    scaler = make_grad_scaler(device, amp_dtype)
    loss_sum_fn = LabelSmoothingLoss(
        plain.config["tgt_vocab"], PAD_ID, config.smoothing, reduction="sum"
    )
    optimizer, scheduler = make_optimizer(
        plain, plain.config["d_model"], config.warmup, config.lr_factor,
        decay=config.decay, total_steps=config.max_steps,
    )

    step, position, tokens_done, seconds_done = 0, (0, 0), 0, 0.0
    earlier_history: list[dict[str, Any]] = []
    if resume:
        if checkpoint_path is None:
            raise ValueError("resume=True needs a checkpoint_path to resume from")
        checkpoint = load_checkpoint(checkpoint_path, map_location="cpu")
        step = restore_training_state(checkpoint, plain, optimizer, scheduler)
        saved = checkpoint.get("extra") or {}
        position = tuple(saved.get("data_position", (0, 0)))
        tokens_done = int(saved.get("tokens", 0))
        seconds_done = float(saved.get("train_seconds", 0.0))
        earlier_history = list(saved.get("history", []))
        log(f"resumed from {checkpoint_path} at step {step}")

    show_bar = progress and dist_info.is_main and sys.stderr.isatty()
    if report_every is None:
        report_every = max(1, (config.max_steps - step) // 20)
    report_every = max(1, report_every)
    bar = tqdm(total=config.max_steps, initial=step, disable=not show_bar, unit="step")
    say = tqdm.write if show_bar else log
    # On resume the history goes on from the earlier runs' evaluations.
    result = TrainResult(step=step, train_seconds=0.0, tokens=tokens_done, tokens_per_second=0.0,
                         history=earlier_history)
    budget = config.max_minutes * 60.0 if config.max_minutes is not None else math.inf

    def save(metrics: dict[str, float]) -> None:
        if checkpoint_path is None or not dist_info.is_main:
            return
        state = {"data_position": list(position), "tokens": tokens_done,
                 "train_seconds": seconds_done + elapsed_training, "train_config": asdict(config),
                 "history": result.history}
        save_checkpoint(checkpoint_path, plain, optimizer=optimizer, scheduler=scheduler,
                        step=step, task=task, tokenizer=tokenizer, metrics=metrics,
                        extra={**(extra or {}), **state})

    def run_evaluation() -> bool:
        """Evaluate on the main process; returns whether every process should stop."""
        nonlocal evaluated_at
        evaluated_at = step
        stop = False
        if evaluate is not None and dist_info.is_main:
            plain.eval()
            with torch.no_grad():
                result.metrics = dict(evaluate(plain))
            plain.train()
            # Training seconds (evaluation excluded, earlier runs included on resume) give a
            # quality-against-time curve.
            result.history.append({"step": step, "train_seconds": seconds_done + elapsed_training,
                                   "train_loss": recent_loss, **result.metrics})
            shown = ", ".join(f"{k} {v:.4g}" for k, v in result.metrics.items())
            say(f"step {step}: train loss {recent_loss:.3f}, {shown}")
            stop = stop_when is not None and stop_when(result.metrics)
        return _all_agree(stop, dist_info, device)

    def report_progress() -> None:
        nonlocal report_loss, report_tokens
        if not dist_info.is_main:
            return
        loss = report_loss / max(report_tokens, 1)
        report_loss, report_tokens = 0.0, 0
        seconds = seconds_done + elapsed_training
        if on_report is not None:
            on_report({"step": step, "train_loss": loss, "train_seconds": seconds,
                       "lr": scheduler.get_last_lr()[0], "max_steps": config.max_steps})
        time_left.update(step, seconds)
        if progress and not show_bar:
            log(f"step {step}/{config.max_steps}: train loss {loss:.3f}, "
                f"{seconds:.0f} s of training, {time_left.describe(config.max_steps - step)}")

    model.train()
    elapsed_training, window_loss, window_tokens = 0.0, 0.0, 0
    report_loss, report_tokens = 0.0, 0
    time_left = TimeLeft()  # from the steps after the first report: start-up is slow
    recent_loss, evaluated_at = math.nan, -1
    batches = iterate_batches(
        train_pairs, config.max_tokens, seed=config.seed, dist_info=dist_info, start=position,
        sort_by_length=config.sort_by_length,
    )
    started = time.perf_counter()
    eval_seconds = 0.0
    while step < config.max_steps:
        position, batch, global_tokens = next(batches)
        batch = batch.to(device)
        loss_sum = backward_step(
            model, batch, loss_sum_fn, global_tokens=global_tokens,
            world_size=dist_info.world_size, amp_dtype=amp_dtype, scaler=scaler,
        )
        optimizer_step(plain, optimizer, scheduler, scaler, config.clip_norm)
        step += 1
        tokens_done += global_tokens
        window_loss += float(loss_sum)
        window_tokens += batch.n_tokens
        report_loss += float(loss_sum)
        report_tokens += batch.n_tokens
        elapsed_training = time.perf_counter() - started - eval_seconds
        recent_loss = window_loss / max(window_tokens, 1)  # mean over the last <= 20 steps
        bar.update(1)
        if step % 20 == 0:
            bar.set_postfix(loss=f"{recent_loss:.3f}", lr=f"{scheduler.get_last_lr()[0]:.2e}")
            window_loss, window_tokens = 0.0, 0

        if step % report_every == 0 or step == config.max_steps:
            report_progress()
        out_of_time = _all_agree(seconds_done + elapsed_training >= budget, dist_info, device)
        stop = False
        if config.eval_every and step % config.eval_every == 0 and step < config.max_steps:
            eval_started = time.perf_counter()
            stop = run_evaluation()
            eval_seconds += time.perf_counter() - eval_started
        if config.save_every and step % config.save_every == 0:
            save(result.metrics)
        if (stop or out_of_time) and step < config.max_steps:
            result.stopped_early = True
            if stop:
                result.stop_reason = "the evaluation's stopping criterion was met"
            else:
                result.stop_reason = (
                    f"the {config.max_minutes:g}-minute time cap was spent after {step} of "
                    f"{config.max_steps} steps, so this model trained less than its preset asks"
                )
            say(f"stopping at step {step}: {result.stop_reason}")
            break
    bar.close()

    if evaluated_at != step:
        run_evaluation()
    save(result.metrics)
    result.step = step
    result.tokens = tokens_done
    result.train_seconds = seconds_done + elapsed_training
    result.tokens_per_second = tokens_done / max(result.train_seconds, 1e-9)
    return result
