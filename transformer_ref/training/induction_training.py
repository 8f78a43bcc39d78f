"""Training a two-layer attention-only model on random tokens repeated once: the induction task.

A sequence is ``half`` tokens drawn uniformly from the vocabulary, then the same ``half``
tokens again. The first half cannot be predicted (its loss stays near ``log(vocab)``); every
token of the second half but its first can, by a model that finds the earlier occurrence of the
current token and copies the token after it. The loss on the repeated half
(:func:`half_losses`) stays on a plateau, then drops suddenly when an induction head forms
(Olsson et al., 2022). :func:`train_induction` records both halves' losses on a fixed held-out
batch; the small model chapter 12 ships (:data:`SHIPPED_INDUCTION`) comes from
``benchmarks/induction_head.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_ref.model.attention_only import AttentionOnlyModel
from transformer_ref.training.checkpoint import load_checkpoint, save_checkpoint
from transformer_ref.training.lm_training import PRETRAINED

SHIPPED_INDUCTION = PRETRAINED / "induction_attention_only.pt"
TASK = "repeated-random-tokens"


def repeated_tokens(batch: int, half: int, vocab: int, generator: torch.Generator) -> Tensor:
    """Long ``(batch, 2 * half)``: ``half`` uniform random tokens, then the same again."""
    first = torch.randint(0, vocab, (batch, half), generator=generator)
    return torch.cat([first, first], dim=1)


def half_losses(model: nn.Module, ids: Tensor) -> tuple[Tensor, Tensor]:
    """The next-token loss on the first half and on the repeated half of ``ids``
    ``(B, 2 * half)``: the targets at positions ``1 .. half`` (none can be predicted) and at
    ``half + 1 .. 2 * half - 1`` (each repeats the token ``half`` positions back)."""
    half = ids.size(1) // 2
    logits = model(ids[:, :-1])  # (B, 2 * half - 1, V): row j predicts position j + 1
    per_token = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
    return per_token[:, :half].mean(), per_token[:, half:].mean()


@dataclass
class InductionConfig:
    """The task and its optimisation: ``vocab`` tokens, sequences of ``2 * half``, batches of
    ``batch``, AdamW at ``lr`` (constant), a report every ``eval_every`` steps on a held-out
    batch of ``eval_batch`` sequences; ``seed`` seeds the model and the data."""

    steps: int = 1500
    vocab: int = 64
    half: int = 16
    batch: int = 32
    lr: float = 1e-3
    eval_every: int = 10
    eval_batch: int = 256
    seed: int = 0


def train_induction(model: nn.Module, config: InductionConfig,
                    on_report: Callable[[dict[str, Any]], None] | None = None,
                    ) -> list[dict[str, Any]]:
    """Train ``model`` (seeded by the caller) on the induction task with the loss on both halves;
    return the reports ``{"step", "seconds", "first_half_loss", "repeated_half_loss"}`` (held-out
    batch; ``seconds``: training time so far, evaluations excluded). The model is left in eval
    mode."""
    data = torch.Generator().manual_seed(config.seed)
    held_out = repeated_tokens(config.eval_batch, config.half, config.vocab, data)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)
    reports: list[dict[str, Any]] = []
    seconds = 0.0
    for step in range(1, config.steps + 1):
        ids = repeated_tokens(config.batch, config.half, config.vocab, data)
        started = time.perf_counter()
        model.train()
        loss = sum(half_losses(model, ids)) / 2
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        seconds += time.perf_counter() - started
        if step % config.eval_every == 0 or step == config.steps:
            model.eval()
            with torch.no_grad():
                first, repeated = half_losses(model, held_out)
            reports.append({"step": step, "seconds": seconds, "first_half_loss": float(first),
                            "repeated_half_loss": float(repeated)})
            if on_report is not None:
                on_report(reports[-1])
    model.eval()
    return reports


def save_induction_model(path: str | Path, model: AttentionOnlyModel, config: InductionConfig,
                         reports: list[dict[str, Any]], metrics: dict[str, Any]) -> None:
    """Save ``model`` in float16 with its training settings, reports and ``metrics``."""
    kept = AttentionOnlyModel(**model.config)
    kept.load_state_dict(model.state_dict())
    save_checkpoint(path, kept.half(), step=config.steps, task=TASK, metrics=metrics,
                    extra={"reports": reports, "train_config": asdict(config)})


def load_induction_model(path: str | Path = SHIPPED_INDUCTION
                         ) -> tuple[AttentionOnlyModel, InductionConfig, dict[str, Any]]:
    """``(model, config, checkpoint)`` of a saved induction model, float32, in eval mode."""
    checkpoint = load_checkpoint(path)
    if checkpoint.get("task") != TASK:
        raise ValueError(f"{path} holds a {checkpoint.get('task')!r} checkpoint, not a model of "
                         f"the induction task")
    model = AttentionOnlyModel(**checkpoint["model_config"])
    model.load_state_dict({k: v.float() for k, v in checkpoint["model"].items()})
    config = InductionConfig(**checkpoint["extra"]["train_config"])
    return model.eval(), config, checkpoint
