"""Saving and restoring training state: model, optimizer, schedule, step and random state.

A checkpoint is a dict saved with ``torch.save`` holding

``"model"``          the model's ``state_dict``
``"model_config"``   ``model.config``: ``build_model(**config)`` rebuilds the architecture
``"optimizer"``      optimizer ``state_dict`` (or None)
``"scheduler"``      learning-rate scheduler ``state_dict`` (or None)
``"step"``           optimizer steps taken
``"task"``           ``"copy" | "reverse" | "sort" | "multi30k"`` (or None)
``"tokenizer"``      the tokenizer as a JSON string (Multi30k), else None
``"metrics"``        the latest evaluation metrics (dict)
``"rng"``            torch CPU (and CUDA) random states, so a resumed run draws the same dropout
``"extra"``          anything else the training loop needs to resume (e.g. data position)

Everything in it is plain tensors, numbers, strings, lists and dicts, so it loads with
``torch.load(..., weights_only=True)``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from transformer_ref.model.build import build_model


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside a DistributedDataParallel (or similar) wrapper."""
    return getattr(model, "module", model)


def rng_state() -> dict[str, Any]:
    """The torch random states of this process (CPU and, when present, every CUDA device)."""
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    step: int = 0,
    task: str | None = None,
    tokenizer: str | None = None,
    metrics: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint to ``path`` (atomically: a crash never leaves half a file).

    ``tokenizer`` is the tokenizer's JSON string (``Tokenizer.to_str()``), if any.
    Returns the path written.
    """
    model = unwrap(model)
    if not hasattr(model, "config"):
        raise TypeError(
            "save_checkpoint needs a model built by make_model or build_model "
            f"(it has a .config dict); got {type(model).__name__}"
        )
    checkpoint = {
        "model": model.state_dict(),
        "model_config": dict(model.config),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "step": int(step),
        "task": task,
        "tokenizer": tokenizer,
        "metrics": dict(metrics or {}),
        "rng": rng_state(),
        "extra": dict(extra or {}),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(checkpoint, partial)
    os.replace(partial, path)
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint dict written by :func:`save_checkpoint`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {path}; train one first, e.g. "
            f"`python -m transformer_ref.train --task reverse --out {path.parent}`"
        )
    checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    missing = {"model", "model_config", "step"} - set(checkpoint)
    if missing:
        raise ValueError(f"{path} is not a transformer_ref checkpoint (missing {sorted(missing)})")
    return checkpoint


def restore_training_state(
    checkpoint: dict[str, Any],
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
) -> int:
    """Load model, optimizer, scheduler and random state from ``checkpoint``; return its step."""
    unwrap(model).load_state_dict(checkpoint["model"])
    if optimizer is not None and checkpoint.get("optimizer") is not None:
        optimizer.load_state_dict(checkpoint["optimizer"])
    if scheduler is not None and checkpoint.get("scheduler") is not None:
        scheduler.load_state_dict(checkpoint["scheduler"])
    if checkpoint.get("rng") is not None:
        set_rng_state(checkpoint["rng"])
    return int(checkpoint["step"])


def load_model(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[nn.Module, dict[str, Any]]:
    """Rebuild the model stored in a checkpoint, on ``device`` and in eval mode.

    Returns ``(model, checkpoint_dict)``.
    """
    checkpoint = load_checkpoint(path, map_location="cpu")
    model = build_model(**checkpoint["model_config"])
    model.load_state_dict(checkpoint["model"])
    return model.to(device).eval(), checkpoint
