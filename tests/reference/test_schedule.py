"""The Noam learning-rate schedule."""

import pytest
import torch

from transformer_ref.training.schedule import (
    linear_decay_rate,
    make_lr_lambda,
    noam_lambda,
    noam_rate,
)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        # Warm-up: d_model^-0.5 * step * warmup^-1.5, with 512^-0.5 = 0.0441942 and
        # 4000^-1.5 = 3.95285e-6.
        (1, 0.0441942 * 3.95285e-6),
        (1000, 0.0441942 * 1000 * 3.95285e-6),
        # Peak: 512^-0.5 * 4000^-0.5.
        (4000, 6.98771e-4),
        # Decay: d_model^-0.5 * step^-0.5.
        (10000, 0.0441942 * 0.01),
        (50000, 0.0441942 / 223.6068),
    ],
)
def test_known_values(step, expected):
    assert noam_rate(step, 512, 4000) == pytest.approx(expected, rel=1e-5)


def test_shape_of_the_curve():
    rates = [noam_rate(s, 512, 4000) for s in range(1, 20001)]
    peak = max(range(len(rates)), key=rates.__getitem__) + 1
    assert peak == 4000
    assert noam_rate(2000, 512, 4000) == pytest.approx(noam_rate(4000, 512, 4000) / 2)
    assert noam_rate(16000, 512, 4000) == pytest.approx(noam_rate(4000, 512, 4000) / 2)
    assert noam_rate(0, 512, 4000) == noam_rate(1, 512, 4000)
    assert noam_rate(100, 512, 4000, factor=2.0) == pytest.approx(2 * noam_rate(100, 512, 4000))


def test_lambda_lr_integration():
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([param], lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, noam_lambda(64, 10, factor=0.5))
    seen = []
    for _ in range(30):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    expected = [noam_rate(s, 64, 10, 0.5) for s in range(30)]
    assert seen == pytest.approx(expected)


def test_bad_arguments():
    with pytest.raises(ValueError, match="warmup"):
        noam_rate(1, 512, 0)
    with pytest.raises(ValueError, match="step"):
        noam_rate(-1, 512, 10)


def test_linear_decay_warms_up_like_noam_then_falls_to_zero():
    peak = noam_rate(100, 256, 100, 0.5)
    assert linear_decay_rate(50, 256, 100, 300, 0.5) == pytest.approx(peak / 2)
    assert linear_decay_rate(100, 256, 100, 300, 0.5) == pytest.approx(peak)
    assert linear_decay_rate(200, 256, 100, 300, 0.5) == pytest.approx(peak / 2)
    assert linear_decay_rate(300, 256, 100, 300, 0.5) == 0.0
    assert linear_decay_rate(350, 256, 100, 300, 0.5) == 0.0  # a resumed run past its end
    assert linear_decay_rate(0, 256, 100, 300) == linear_decay_rate(1, 256, 100, 300)


def test_make_lr_lambda_picks_the_decay():
    assert make_lr_lambda("inverse_sqrt", 64, 10, 50)(30) == noam_rate(30, 64, 10)
    assert make_lr_lambda("linear", 64, 10, 50)(30) == linear_decay_rate(30, 64, 10, 50)
    with pytest.raises(ValueError, match="unknown decay 'cosine'"):
        make_lr_lambda("cosine", 64, 10, 50)
    with pytest.raises(ValueError, match=r"total_steps \(10\) must be larger than warmup"):
        make_lr_lambda("linear", 64, 10, 10)
