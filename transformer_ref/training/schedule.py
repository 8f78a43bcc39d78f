"""The learning-rate schedule of "Attention Is All You Need" (often called the Noam schedule).

    lr(step) = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

The rate grows linearly for ``warmup`` steps, peaks at ``factor * (d_model * warmup)^-0.5``
and then decays with the inverse square root of the step.

A run with a fixed number of steps can instead let the rate fall linearly from the same peak
to zero at its last step (:func:`linear_decay_rate`): short runs end with small, careful
updates, which is worth several BLEU points when a CPU affords only a few hundred steps.
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


def linear_decay_rate(
    step: int, d_model: int, warmup: int, total_steps: int, factor: float = 1.0
) -> float:
    """The Noam warm-up to the same peak, then a straight line down to 0 at ``total_steps``.

    Steps past ``total_steps`` (a resumed run asked to go further) get a rate of 0.
    """
    _check_positive("total_steps", total_steps)
    if total_steps <= warmup:
        raise ValueError(
            f"total_steps ({total_steps}) must be larger than warmup ({warmup}); shorten the "
            f"warm-up or train for more steps"
        )
    peak = noam_rate(warmup, d_model, warmup, factor)
    step = max(step, 1)
    if step <= warmup:
        return peak * step / warmup
    return peak * max(0.0, (total_steps - step) / (total_steps - warmup))


def make_lr_lambda(
    decay: str, d_model: int, warmup: int, total_steps: int, factor: float = 1.0
) -> Callable[[int], float]:
    """A ``lr_lambda`` for ``LambdaLR``: ``decay`` is ``"inverse_sqrt"`` (Noam) or ``"linear"``."""
    if decay == "inverse_sqrt":
        return noam_lambda(d_model, warmup, factor)
    if decay == "linear":
        linear_decay_rate(1, d_model, warmup, total_steps, factor)  # check the arguments now

        def rate(step: int) -> float:
            return linear_decay_rate(step, d_model, warmup, total_steps, factor)

        return rate
    raise ValueError(f"unknown decay {decay!r}; choose 'inverse_sqrt' or 'linear'")
