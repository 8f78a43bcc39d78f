"""Choosing the device and the mixed-precision settings for training and decoding."""

from __future__ import annotations

import re

import torch

_DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def resolve_device(spec: str | torch.device = "auto") -> torch.device:
    """Turn ``"auto" | "cpu" | "cuda" | "cuda:N"`` into a ``torch.device``.

    ``"auto"`` picks the first CUDA GPU when one is visible and the CPU otherwise.
    Asking for CUDA on a machine without a visible GPU (or for a GPU index that does not
    exist) raises a ValueError that says what to pass instead.
    """
    if isinstance(spec, torch.device):
        spec = str(spec)
    spec = spec.strip().lower()
    if not _DEVICE_PATTERN.match(spec):
        raise ValueError(
            f"unknown device {spec!r}; expected 'auto', 'cpu', 'cuda' or 'cuda:N' "
            "(for example --device auto)"
        )
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(
            f"--device {spec} was asked for but no CUDA GPU is visible; "
            "use --device cpu or auto"
        )
    device = torch.device(spec)
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise ValueError(
            f"--device {spec} was asked for but only {count} CUDA GPU(s) are visible "
            f"(indices 0..{count - 1}); use --device cuda or auto"
        )
    return device


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The dtype for ``torch.autocast`` on ``device``, or None for full float32.

    bfloat16 on GPUs that support it (same range as float32, no loss scaling needed),
    float16 on older GPUs (pair it with :func:`make_grad_scaler`), nothing on the CPU,
    where autocast rarely pays off for models this small.
    """
    if device.type != "cuda":
        return None
    if torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16


def make_grad_scaler(device: torch.device, amp_dtype: torch.dtype | None) -> torch.amp.GradScaler:
    """A GradScaler that is active only for float16 autocast (a no-op otherwise)."""
    return torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)


def device_name(device: torch.device) -> str:
    """A human-readable name, e.g. ``"cuda:0 (NVIDIA H100 80GB HBM3)"`` or ``"cpu"``."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)
