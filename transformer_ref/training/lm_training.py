"""Training a language model on the English side of Multi30k, and the model that ships.

A sentence becomes ``[BOS] + its BPE ids + [EOS]``; batches of similar lengths are padded
on the right with ``PAD_ID``. The **next-token loss** (:func:`next_token_loss`) feeds the
model every token but the last and asks it, at each position, for the token that follows:
the cross-entropy of ``logits[:, :-1]`` against ``ids[:, 1:]``, padding ignored. Since the
padding sits after the end of every sentence and the model is causal, no real position ever
reads it.

:func:`train_language_model` is a plain AdamW loop with a linear warm-up and a linear decay to
zero, which reports the training loss and the validation loss as it goes.
:func:`load_language_model` reads a saved model with its tokenizer, into the course's
``LanguageModel`` or a class of the caller's own; the small model of chapter 11 ships with this
package (:data:`SHIPPED_LM`, float16, made by
``benchmarks/ship_language_model.py``), and so do chapter 12's two models of the comparison of
blocks (:data:`SHIPPED_BLOCKS`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from copy import deepcopy
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch import Tensor, nn

from transformer_ref.data.batching import bucket_by_tokens, pad_sequences
from transformer_ref.data.datasets import load_multi30k
from transformer_ref.data.tokenizer import encode_batch
from transformer_ref.data.vocab import BOS_ID, PAD_ID
from transformer_ref.training.checkpoint import load_checkpoint, save_checkpoint

PRETRAINED = Path(__file__).resolve().parents[1] / "pretrained"
SHIPPED_LM = PRETRAINED / "multi30k_en_lm.pt"
# Chapter 12's comparison of blocks at equal size (benchmarks/modern_vs_gpt.py): chapter 11's
# GPT block and today's block, one small model of each.
SHIPPED_BLOCKS = {"gpt": PRETRAINED / "multi30k_en_gpt_block.pt",
                  "modern": PRETRAINED / "multi30k_en_modern_block.pt"}
TASK = "multi30k-en-lm"


def english_sentences(split: str, data_dir: str | Path | None = None) -> list[str]:
    """The English sentences of a Multi30k split (``"train"``, ``"val"``, ...)."""
    return [english for _, english in load_multi30k(split, data_dir)]


def encode_sentences(tok: Tokenizer, sentences: Sequence[str]) -> list[list[int]]:
    """``[BOS] + ids + [EOS]`` for every sentence."""
    return [[BOS_ID, *ids] for ids in encode_batch(tok, list(sentences))]


def lm_batches(sequences: Sequence[Sequence[int]], max_tokens: int, *, shuffle: bool,
               seed: int = 0) -> list[Tensor]:
    """Long ``(B, L)`` batches of similar lengths, right-padded with ``PAD_ID``, each with at
    most ``max_tokens`` padded tokens (see
    :func:`transformer_ref.data.batching.bucket_by_tokens`)."""
    groups = bucket_by_tokens([len(s) for s in sequences], max_tokens, shuffle=shuffle,
                              seed=seed)
    return [pad_sequences([list(sequences[i]) for i in group]) for group in groups]


def next_token_loss(model: nn.Module, ids: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Mean cross-entropy of predicting ``ids[:, 1:]`` from ``ids[:, :-1]``.

    Args:
        model: Long ``(B, T - 1)`` -> logits ``(B, T - 1, V)``.
        ids: Long ``(B, T)`` sequences, right-padded with ``pad_id``.

    Returns:
        A scalar: the mean over the real (not padding) targets, in nats per token.
    """
    logits = model(ids[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten(),
                           ignore_index=pad_id)


@torch.no_grad()
def evaluate_loss(model: nn.Module, batches: Sequence[Tensor], device: torch.device | str = "cpu"
                  ) -> float:
    """The next-token loss over all real targets of ``batches`` (nats per token), in eval
    mode; the model's mode is restored afterwards."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for ids in batches:
        ids = ids.to(device)
        n = int((ids[:, 1:] != PAD_ID).sum())
        total += float(next_token_loss(model, ids)) * n
        count += n
    model.train(was_training)
    return total / max(count, 1)


@dataclass
class LMTrainConfig:
    """Optimisation settings of :func:`train_language_model`.

    Attributes:
        steps: optimizer steps.
        max_tokens: padded tokens per batch.
        lr: peak learning rate of AdamW, reached after ``warmup`` steps, then decayed linearly
            to 0 at ``steps``.
        warmup: steps of linear warm-up.
        weight_decay: AdamW's decoupled weight decay (matrices only).
        clip_norm: gradient-norm clipping threshold.
        eval_every: steps between reports (training and validation loss).
        seed: seeds the batch order (one new shuffle per pass over the data).
    """

    steps: int
    max_tokens: int = 2000
    lr: float = 2e-3
    warmup: int = 100
    weight_decay: float = 0.1
    clip_norm: float = 1.0
    eval_every: int = 50
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "max_tokens", "warmup", "eval_every"):
            if getattr(self, name) <= 0:
                raise ValueError(f"LMTrainConfig.{name} must be positive, got "
                                 f"{getattr(self, name)}")


def _optimizer(model: nn.Module, config: LMTrainConfig) -> torch.optim.Optimizer:
    # Weight decay on matrices only: shrinking LayerNorm gains or biases has no regularising use.
    matrices = [p for p in model.parameters() if p.dim() > 1]
    others = [p for p in model.parameters() if p.dim() <= 1]
    return torch.optim.AdamW([{"params": matrices, "weight_decay": config.weight_decay},
                              {"params": others, "weight_decay": 0.0}],
                             lr=config.lr, betas=(0.9, 0.98))


def _warmup_then_linear(optimizer: torch.optim.Optimizer, config: LMTrainConfig
                        ) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate rising linearly over ``config.warmup`` steps, then falling linearly
    to zero at the last step."""
    def rate(step: int) -> float:
        if step < config.warmup:
            return (step + 1) / config.warmup
        return max(0.0, (config.steps - step) / max(1, config.steps - config.warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, rate)


def train_language_model(
    model: nn.Module,
    train: Sequence[Sequence[int]],
    val: Sequence[Sequence[int]],
    config: LMTrainConfig,
    *,
    device: torch.device | str = "cpu",
    on_report: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Train ``model`` with the next-token loss; return one report per ``eval_every`` steps.

    Args:
        model: a language model on ``device``.
        train, val: sequences of ids (``[BOS] ... [EOS]``).
        on_report: called with each report as it is made (e.g. to draw a live loss curve).

    Returns:
        Reports ``{"step", "seconds", "tokens", "train_loss", "val_loss", "lr"}``;
        ``train_loss`` is the mean over the steps since the previous report, ``seconds`` the
        training time so far (evaluations excluded) and ``tokens`` the real (not padding)
        target tokens trained on so far. The model is left in eval mode.
    """
    val_batches = lm_batches(val, config.max_tokens, shuffle=False)
    optimizer = _optimizer(model, config)
    scheduler = _warmup_then_linear(optimizer, config)
    reports: list[dict[str, Any]] = []
    losses: list[float] = []
    seconds, tokens, epoch, batches = 0.0, 0, 0, []
    model.train()
    for step in range(1, config.steps + 1):
        if not batches:
            batches = lm_batches(train, config.max_tokens, shuffle=True,
                                 seed=config.seed + epoch)
            epoch += 1
        ids = batches.pop()
        tokens += int((ids[:, 1:] != PAD_ID).sum())
        started = time.perf_counter()
        loss = next_token_loss(model, ids.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
        optimizer.step()
        scheduler.step()
        seconds += time.perf_counter() - started
        losses.append(loss.item())
        if step % config.eval_every == 0 or step == config.steps:
            report = {"step": step, "seconds": seconds, "tokens": tokens,
                      "train_loss": sum(losses) / len(losses),
                      "val_loss": evaluate_loss(model, val_batches, device),
                      "lr": optimizer.param_groups[0]["lr"]}
            losses = []
            reports.append(report)
            if on_report is not None:
                on_report(report)
    model.eval()
    return reports


def perplexity(loss: float) -> float:
    """``exp(loss)``: the number of equally likely tokens that would give the same loss."""
    return math.exp(loss)


def save_language_model(path: str | Path, model: nn.Module, tok: Tokenizer, *,
                        step: int, reports: list[dict[str, Any]],
                        metrics: dict[str, Any], train_config: LMTrainConfig | None = None,
                        half: bool = True) -> Path:
    """Save ``model`` (a language model with a ``config``; in float16 unless ``half=False``),
    its tokenizer, the loss reports and ``metrics``; :func:`load_language_model` reads it
    back."""
    kept = deepcopy(model).cpu()
    if half:
        kept.half()
    extra = {"reports": reports,
             "train_config": asdict(train_config) if train_config is not None else None}
    return save_checkpoint(path, kept, step=step, task=TASK, tokenizer=tok.to_str(),
                           metrics=metrics, extra=extra)


def load_language_model(path: str | Path = SHIPPED_LM, device: torch.device | str = "cpu",
                        model_class: Callable[..., nn.Module] | None = None,
                        ) -> tuple[nn.Module, Tokenizer, dict[str, Any]]:
    """``(model, tokenizer, checkpoint)`` of a saved language model; the model is float32, on
    ``device``, in eval mode. The default is the model that ships with the course.

    Args:
        model_class: builds the model from the saved configuration,
            ``model_class(**checkpoint["model_config"])``, before the weights are loaded into
            it: any class with the parameter names of
            :class:`transformer_ref.model.language_model.LanguageModel` (chapter 11's notebook
            passes the learner's own). Default: that class. It is imported only then, so that
            reading a checkpoint into another class never loads the course's answer.
    """
    checkpoint = load_checkpoint(path)
    if checkpoint.get("task") != TASK:
        raise ValueError(f"{path} holds a {checkpoint.get('task')!r} checkpoint, not a language "
                         f"model; save one with save_language_model")
    if model_class is None:
        from transformer_ref.model.language_model import LanguageModel

        model_class = LanguageModel
    model = model_class(**checkpoint["model_config"])
    model.load_state_dict(checkpoint["model"])
    return model.to(device).eval(), Tokenizer.from_str(checkpoint["tokenizer"]), checkpoint


def prompt_ids(tok: Tokenizer, prompts: Sequence[str]) -> list[list[int]]:
    """``[BOS] + ids`` of each prompt (no EOS: the model continues the text)."""
    return [[BOS_ID, *ids[:-1]] for ids in encode_batch(tok, list(prompts))]

