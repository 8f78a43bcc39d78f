"""Label-smoothed cross-entropy: closed form, plain cross-entropy, padding and stability."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_ref.data.vocab import PAD_ID
from transformer_ref.training.losses import LabelSmoothingLoss


def closed_form(logits: torch.Tensor, target: torch.Tensor, eps: float) -> float:
    """Loss written out token by token from the definition (independent of the module)."""
    vocab = logits.shape[-1]
    total, count = 0.0, 0
    rows, golds = logits.reshape(-1, vocab).tolist(), target.reshape(-1).tolist()
    for row, gold in zip(rows, golds, strict=True):
        if gold == PAD_ID:
            continue
        log_z = math.log(sum(math.exp(x) for x in row))
        for c, x in enumerate(row):
            if c == PAD_ID:
                continue
            q = 1 - eps if c == gold else eps / (vocab - 2)
            total -= q * (x - log_z)
        count += 1
    return total / count


def test_matches_closed_form():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7, dtype=torch.float64)
    target = torch.randint(1, 7, (3, 5))
    target[0, 3:] = PAD_ID
    loss = LabelSmoothingLoss(7, smoothing=0.2)(logits, target)
    assert loss.item() == pytest.approx(closed_form(logits, target, 0.2), rel=1e-5)


def test_no_smoothing_equals_cross_entropy():
    torch.manual_seed(1)
    logits = torch.randn(4, 6, 11)
    target = torch.randint(0, 11, (4, 6))
    ours = LabelSmoothingLoss(11, smoothing=0.0)(logits, target)
    ref = F.cross_entropy(logits.reshape(-1, 11), target.reshape(-1), ignore_index=PAD_ID)
    torch.testing.assert_close(ours, ref)


def test_padding_positions_are_ignored():
    torch.manual_seed(2)
    logits = torch.randn(2, 4, 9)
    target = torch.tensor([[5, 6, PAD_ID, PAD_ID], [7, 8, 4, PAD_ID]])
    loss_fn = LabelSmoothingLoss(9)
    changed = logits.clone()
    changed[0, 2:] = 100 * torch.randn(2, 9)  # whatever the model says at padding
    changed[1, 3] = float("nan")
    torch.testing.assert_close(loss_fn(logits, target), loss_fn(changed, target))
    summed = LabelSmoothingLoss(9, reduction="sum")(logits, target)
    torch.testing.assert_close(summed / 5, loss_fn(logits, target))


def test_finite_with_inf_logits_and_all_padding():
    logits = torch.randn(2, 3, 6)
    logits[..., 4] = float("-inf")
    logits[0, 0] = float("-inf")
    logits.requires_grad_(True)
    target = torch.tensor([[4, 5, 2], [3, PAD_ID, PAD_ID]])
    loss = LabelSmoothingLoss(6)(logits, target)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()

    empty = torch.randn(2, 3, 6, requires_grad=True)
    loss = LabelSmoothingLoss(6)(empty, torch.zeros(2, 3, dtype=torch.long))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(empty.grad, torch.zeros_like(empty))


def test_smoothed_targets_distribution():
    dist = LabelSmoothingLoss(6, smoothing=0.4).smoothed_targets(torch.tensor([3, PAD_ID, 5]))
    expected = torch.tensor([
        [0.0, 0.1, 0.1, 0.6, 0.1, 0.1],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 0.1, 0.1, 0.1, 0.1, 0.6],
    ])
    torch.testing.assert_close(dist, expected)


def test_smoothed_loss_is_minimised_by_the_smoothed_distribution():
    # Cross-entropy is smallest when the model predicts exactly the target distribution.
    loss_fn = LabelSmoothingLoss(5, smoothing=0.3)
    target = torch.tensor([2])
    best = loss_fn.smoothed_targets(target).clamp(min=1e-12).log()
    assert loss_fn(best, target) < loss_fn(best + 0.5 * torch.randn(1, 5), target)


@pytest.mark.parametrize("kwargs", [dict(smoothing=1.0), dict(smoothing=-0.1), dict(pad_id=9)])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        LabelSmoothingLoss(5, **kwargs)
