"""The learning-rate schedule of "Attention Is All You Need" (often called the Noam schedule).

    lr(step) = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

The rate grows linearly for ``warmup`` steps, peaks at ``factor * (d_model * warmup)^-0.5``
and then decays with the inverse square root of the step.
"""

from __future__ import annotations

from collections.abc import Callable


def _check_positive(name: str, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")


def noam_rate(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """Learning rate at optimizer step ``step`` (1-based; step 0 is treated as step 1).

    ``torch.optim.lr_scheduler.LambdaLR`` evaluates its lambda at step 0 before the first
    update, and ``0^-0.5`` is undefined, hence the clamp.
    """
    _check_positive("d_model", d_model)
    _check_positive("warmup", warmup)
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_lambda(d_model: int, warmup: int, factor: float = 1.0) -> Callable[[int], float]:
    """A ``lr_lambda`` for ``LambdaLR``; give the optimizer a base learning rate of 1.0.

    Example::

        opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, noam_lambda(512, 4000))
    """
    _check_positive("d_model", d_model)
    _check_positive("warmup", warmup)

    def rate(step: int) -> float:
        return noam_rate(step, d_model, warmup, factor)

    return rate
