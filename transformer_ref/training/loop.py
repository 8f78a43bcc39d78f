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

:func:`fit` is the loop, read from top to bottom; what it keeps from step to step is one
:class:`TrainState` (saved in and restored from checkpoints), the optimizer and what else a
step uses are one :class:`Optimisation`, and the bar, the progress lines and reports are one
:class:`Progress`.

Multi-GPU: start the same command with ``torchrun --nproc_per_node=K``; :func:`init_distributed`
joins the process group, and :func:`fit`, in a process that joined one, wraps the model in
DistributedDataParallel and trains on its share of every batch.
"""

from __future__ import annotations

import contextlib
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

from transformer_ref.data.batching import Batch, bucket_by_tokens, collate
from transformer_ref.data.vocab import PAD_ID
from transformer_ref.training.checkpoint import (
    load_checkpoint,
    restore_training_state,
    save_checkpoint,
    unwrap,
)
from transformer_ref.training.device import autocast_dtype, make_grad_scaler, resolve_device
from transformer_ref.training.losses import LabelSmoothingLoss
from transformer_ref.training.progress import TimeLeft
from transformer_ref.training.schedule import make_lr_lambda

Pair = tuple[list[int], list[int]]


@dataclass
class TrainConfig:
    """Optimisation settings, and how often a run evaluates, saves and reports (model settings
    live in ``make_model``'s arguments).

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
        report_every: steps between progress reports (None: a twentieth of the steps a run
            takes, at least 1); see :class:`Progress`.
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
    report_every: int | None = None
    max_minutes: float | None = None
    seed: int = 0
    amp: bool = True
    sort_by_length: bool = True

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_tokens", "warmup"):
            if getattr(self, name) <= 0:
                raise ValueError(f"TrainConfig.{name} must be positive, got {getattr(self, name)}")
        if self.report_every is not None and self.report_every <= 0:
            raise ValueError(f"TrainConfig.report_every must be positive or None, got "
                             f"{self.report_every}")
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

    @classmethod
    def current(cls) -> DistInfo:
        """This process's place: in the process group it joined (:func:`init_distributed`),
        or a single process."""
        if not (dist.is_available() and dist.is_initialized()):
            return cls()
        return cls(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


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

    ``decay`` picks what follows the warm-up (see
    :func:`transformer_ref.training.schedule.make_lr_lambda`); ``"linear"`` reaches 0 at
    ``total_steps``.
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
# The run: its optimisation, its state, its clock and its progress


@dataclass
class Optimisation:
    """What one optimizer step uses: the model (wrapped in DistributedDataParallel under
    DDP), the plain model inside it, Adam and its schedule, the loss, mixed precision."""

    model: nn.Module
    plain: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    loss_sum_fn: LabelSmoothingLoss
    amp_dtype: torch.dtype | None
    device: torch.device
    dist_info: DistInfo

    @classmethod
    def build(cls, model: nn.Module, config: TrainConfig, device: torch.device,
              dist_info: DistInfo) -> Optimisation:
        """The optimisation of ``model`` (built by ``make_model``, on ``device``)."""
        plain = unwrap(model)
        if dist_info.enabled:
            model = DistributedDataParallel(
                plain, device_ids=[device.index] if device.type == "cuda" else None
            )
        amp_dtype = autocast_dtype(device) if config.amp else None
        optimizer, scheduler = make_optimizer(
            plain, plain.config["d_model"], config.warmup, config.lr_factor,
            decay=config.decay, total_steps=config.max_steps,
        )
        loss_sum_fn = LabelSmoothingLoss(
            plain.config["tgt_vocab"], PAD_ID, config.smoothing, reduction="sum"
        )
        return cls(model, plain, optimizer, scheduler, make_grad_scaler(device, amp_dtype),
                   loss_sum_fn, amp_dtype, device, dist_info)

    def step(self, batch: Batch, global_tokens: int, clip_norm: float | None) -> float:
        """One optimizer step on ``batch``; the summed loss of this process's examples."""
        loss_sum = backward_step(
            self.model, batch, self.loss_sum_fn, global_tokens=global_tokens,
            world_size=self.dist_info.world_size, amp_dtype=self.amp_dtype, scaler=self.scaler,
        )
        optimizer_step(self.plain, self.optimizer, self.scheduler, self.scaler, clip_norm)
        return float(loss_sum)

    @property
    def lr(self) -> float:
        return self.scheduler.get_last_lr()[0]

    def all_agree(self, flag: bool) -> bool:
        """True if any process says True (so every process stops at the same step)."""
        if not self.dist_info.enabled:
            return flag
        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item() > 0)


@dataclass
class TrainState:
    """Where a run stands; a checkpoint keeps it with the model, optimizer, schedule and random
    state, so that a resumed run goes on exactly where it stopped.

    Attributes:
        step: optimizer steps taken (earlier runs included).
        position: ``(epoch, batch index)`` of the next batch.
        tokens: target tokens trained on.
        seconds: seconds of training (evaluation excluded, earlier runs included).
        history: one dict per evaluation (see :class:`TrainResult`).
        metrics: the last evaluation's metrics.
    """

    step: int = 0
    position: tuple[int, int] = (0, 0)
    tokens: int = 0
    seconds: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_checkpoint(cls, path: str | Path, run: Optimisation) -> TrainState:
        """The state saved at ``path``; the model, optimizer, schedule and random state of
        ``run`` are restored from it too."""
        checkpoint = load_checkpoint(path, map_location="cpu")
        step = restore_training_state(checkpoint, run.plain, run.optimizer, run.scheduler)
        saved = checkpoint.get("extra") or {}
        return cls(step, tuple(saved.get("data_position", (0, 0))), int(saved.get("tokens", 0)),
                   float(saved.get("train_seconds", 0.0)), list(saved.get("history", [])))

    def result(self, stop_reason: str | None) -> TrainResult:
        """What :func:`fit` reports when the run ends here (early, for ``stop_reason``)."""
        return TrainResult(step=self.step, train_seconds=self.seconds, tokens=self.tokens,
                           tokens_per_second=self.tokens / max(self.seconds, 1e-9),
                           metrics=self.metrics, history=self.history,
                           stopped_early=stop_reason is not None, stop_reason=stop_reason)

    def to_checkpoint(self, checkpoint: Checkpointing, run: Optimisation,
                      config: TrainConfig) -> None:
        """Save this state, ``run``'s and what ``checkpoint`` adds, at ``checkpoint.path``."""
        state = {"data_position": list(self.position), "tokens": self.tokens,
                 "train_seconds": self.seconds, "train_config": asdict(config),
                 "history": self.history}
        save_checkpoint(checkpoint.path, run.plain, optimizer=run.optimizer,
                        scheduler=run.scheduler, step=self.step, task=checkpoint.task,
                        tokenizer=checkpoint.tokenizer, metrics=self.metrics,
                        extra={**checkpoint.extra, **state})


@dataclass(frozen=True)
class Checkpointing:
    """Where a run saves its checkpoints, whether it resumes from there, and what the
    checkpoint stores besides the training state (see :mod:`transformer_ref.training.checkpoint`).

    Attributes:
        path: the checkpoint file, saved every ``save_every`` steps and at the end.
        resume: continue from ``path`` (model, optimizer, schedule, step, random state and
            data position).
        task, tokenizer, extra: stored in the checkpoint.
    """

    path: str | Path
    resume: bool = False
    task: str | None = None
    tokenizer: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Stopwatch:
    """Seconds of training: the time since it started, without the pauses (evaluation), plus
    ``before`` (the seconds of earlier runs)."""

    def __init__(self, before: float = 0.0) -> None:
        self.before, self.paused_s = before, 0.0
        self.started = time.perf_counter()

    def seconds(self) -> float:
        return self.before + time.perf_counter() - self.started - self.paused_s

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside the block does not count."""
        paused = time.perf_counter()
        try:
            yield
        finally:
            self.paused_s += time.perf_counter() - paused


class Progress:
    """How far a run is, shown and reported, on the main process.

    In a terminal a tqdm bar shows the steps, with the loss and learning rate every 20 steps;
    elsewhere (a notebook, a log file) a line goes through ``log`` every ``report_every``
    steps, so a long run is never silent, unless ``show`` is False. ``on_report`` is called at
    each report with ``step``, ``train_loss`` (mean of the steps since the last report),
    ``train_seconds``, ``lr`` and ``max_steps``, e.g. to draw a live loss curve. Evaluation and
    stop lines go through :meth:`say`.
    """

    BAR_WINDOW = 20  # steps whose mean loss the bar shows, and evaluations report

    def __init__(self, config: TrainConfig, start: int, *, main: bool, show: bool,
                 log: Callable[[str], None],
                 on_report: Callable[[dict[str, float]], None] | None) -> None:
        self.max_steps, self.main, self.on_report, self.log = config.max_steps, main, on_report, log
        self.lines = show and not (main and sys.stderr.isatty())
        self.every = config.report_every or max(1, (config.max_steps - start) // 20)
        self.bar = tqdm(total=config.max_steps, initial=start, unit="step",
                        disable=not (show and main and sys.stderr.isatty()))
        self.say = log if self.bar.disable else tqdm.write
        self.window, self.report = [0.0, 0], [0.0, 0]  # summed loss and target tokens
        self.recent_loss = math.nan  # mean over the last <= BAR_WINDOW steps
        self.time_left = TimeLeft()  # from the steps after the first report: start-up is slow

    def update(self, state: TrainState, loss_sum: float, n_tokens: int, lr: float) -> None:
        """Count the step ``state.step`` (this process's ``loss_sum`` over ``n_tokens``)."""
        for window in (self.window, self.report):
            window[0] += loss_sum
            window[1] += n_tokens
        self.recent_loss = self.window[0] / max(self.window[1], 1)
        self.bar.update(1)
        if state.step % self.BAR_WINDOW == 0:
            self.bar.set_postfix(loss=f"{self.recent_loss:.3f}", lr=f"{lr:.2e}")
            self.window = [0.0, 0]
        if self.main and (state.step % self.every == 0 or state.step == self.max_steps):
            self._report(state, lr)

    def _report(self, state: TrainState, lr: float) -> None:
        loss = self.report[0] / max(self.report[1], 1)
        self.report = [0.0, 0]
        if self.on_report is not None:
            self.on_report({"step": state.step, "train_loss": loss, "train_seconds": state.seconds,
                            "lr": lr, "max_steps": self.max_steps})
        self.time_left.update(state.step, state.seconds)
        if self.lines:
            self.log(f"step {state.step}/{self.max_steps}: train loss {loss:.3f}, "
                     f"{state.seconds:.0f} s of training, "
                     f"{self.time_left.describe(self.max_steps - state.step)}")


# ---------------------------------------------------------------------------------------------
# The loop


def _evaluate(run: Optimisation, state: TrainState, shown: Progress,
              evaluate: Callable[[nn.Module], dict[str, float]] | None,
              stop_when: Callable[[dict[str, float]], bool] | None) -> bool:
    """Evaluate on the main process (the plain model, in eval mode, without gradients), add the
    metrics to the history and say them; whether every process should stop."""
    stop = False
    if evaluate is not None and run.dist_info.is_main:
        run.plain.eval()
        with torch.no_grad():
            state.metrics = dict(evaluate(run.plain))
        run.plain.train()
        state.history.append({"step": state.step, "train_seconds": state.seconds,
                              "train_loss": shown.recent_loss, **state.metrics})
        shown.say(f"step {state.step}: train loss {shown.recent_loss:.3f}, "
                  + ", ".join(f"{k} {v:.4g}" for k, v in state.metrics.items()))
        stop = stop_when is not None and stop_when(state.metrics)
    return run.all_agree(stop)


def _save(checkpoint: Checkpointing | None, state: TrainState, run: Optimisation,
          config: TrainConfig) -> None:
    """Save a checkpoint from the main process, if the run keeps checkpoints."""
    if checkpoint is not None and run.dist_info.is_main:
        state.to_checkpoint(checkpoint, run, config)


def _stop_reason(config: TrainConfig, step: int, stop: bool, out_of_time: bool) -> str | None:
    """Why training ends at ``step`` before ``max_steps``: the evaluation said ``stop``, or the
    time cap is spent; None to go on."""
    if step >= config.max_steps:
        return None
    if stop:
        return "the evaluation's stopping criterion was met"
    if out_of_time:
        return (f"the {config.max_minutes:g}-minute time cap was spent after {step} of "
                f"{config.max_steps} steps, so this model trained less than its preset asks")
    return None


def fit(model: nn.Module, train_pairs: list[Pair], config: TrainConfig, *, device: torch.device,
        evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
        stop_when: Callable[[dict[str, float]], bool] | None = None,
        checkpoint: Checkpointing | None = None, progress: bool = True,
        log: Callable[[str], None] = print,
        on_report: Callable[[dict[str, float]], None] | None = None) -> TrainResult:
    """Train ``model`` (built by ``make_model``, on ``device``) on ``train_pairs``, the
    ``(src_ids, tgt_ids)`` lists (both ending with EOS), as ``config`` says.

    Args:
        evaluate: called with the plain model in eval mode every ``config.eval_every`` steps
            and at the end, on the main process; returns metrics. Each call adds its metrics to
            ``history`` with the step and the training seconds so far (``train_seconds``).
        stop_when: given those metrics, returns True to stop early.
        checkpoint: where to save checkpoints and whether to resume from there (None: none).
        progress, log, on_report: how the run shows and reports its progress (see
            :class:`Progress`); ``log`` also gets the evaluation lines.

    Returns:
        A :class:`TrainResult`; ``metrics`` are the last evaluation's.
    """
    run = Optimisation.build(model, config, device, DistInfo.current())
    state = TrainState()
    if checkpoint is not None and checkpoint.resume:
        state = TrainState.from_checkpoint(checkpoint.path, run)
        log(f"resumed from {checkpoint.path} at step {state.step}")
    shown = Progress(config, state.step, main=run.dist_info.is_main, show=progress, log=log,
                     on_report=on_report)
    budget = config.max_minutes * 60.0 if config.max_minutes is not None else math.inf
    batches = iterate_batches(train_pairs, config.max_tokens, seed=config.seed,
                              dist_info=run.dist_info, start=state.position,
                              sort_by_length=config.sort_by_length)
    run.model.train()
    clock, evaluated_at, stop_reason = Stopwatch(state.seconds), -1, None
    while state.step < config.max_steps and stop_reason is None:
        state.position, batch, global_tokens = next(batches)
        batch = batch.to(device)
        loss_sum = run.step(batch, global_tokens, config.clip_norm)
        state.step, state.tokens = state.step + 1, state.tokens + global_tokens
        state.seconds = clock.seconds()
        shown.update(state, loss_sum, batch.n_tokens, run.lr)
        out_of_time = run.all_agree(state.seconds >= budget)
        stop, due = False, config.eval_every and state.step % config.eval_every == 0
        if due and state.step < config.max_steps:  # the last step's evaluation follows the loop
            with clock.paused():
                stop, evaluated_at = _evaluate(run, state, shown, evaluate, stop_when), state.step
        if config.save_every and state.step % config.save_every == 0:
            _save(checkpoint, state, run, config)
        stop_reason = _stop_reason(config, state.step, stop, out_of_time)
        if stop_reason is not None:
            shown.say(f"stopping at step {state.step}: {stop_reason}")
    shown.bar.close()
    if evaluated_at != state.step:
        _evaluate(run, state, shown, evaluate, stop_when)
    _save(checkpoint, state, run, config)
    return state.result(stop_reason)
