"""The time-left estimate of a training run follows its recent steps, not its slow start."""

import pytest

from transformer_ref.training.progress import TimeLeft


def test_the_first_report_only_marks_the_end_of_the_start_up():
    clock = TimeLeft()
    assert clock.estimate(100) is None
    clock.update(step=25, seconds=400.0)  # 16 s a step: allocation, imports, first kernels
    assert clock.estimate(675) is None
    assert clock.describe(675) == "estimating the time left"
    clock.update(step=50, seconds=425.0)  # then 1 s a step
    assert clock.estimate(650) == pytest.approx(650.0)
    assert clock.describe(650) == "about 650 s to go"


def test_a_steady_run_is_estimated_right_from_the_second_report():
    """Start-up three times as slow as the rest (as seen on a busy two-core machine): every
    estimate is the time the run then really takes, where an average over the whole run so
    far would first be twice too long."""
    clock, seconds, total = TimeLeft(), 0.0, 700
    for step in range(25, total + 1, 25):
        seconds += 25 * (1.8 if step == 25 else 0.6)
        clock.update(step, seconds)
        if step > 25:
            assert clock.estimate(total - step) == pytest.approx(0.6 * (total - step))
    whole_run_average = (25 * 1.8 + 25 * 0.6) / 50
    assert whole_run_average == pytest.approx(2 * 0.6)


def test_the_estimate_follows_a_change_of_speed():
    """The machine gets busier: the moving average moves to the new speed within a few
    reports, halving its distance from it at each (smoothing 0.5)."""
    clock = TimeLeft(smoothing=0.5)
    clock.update(10, 10.0)
    clock.update(20, 20.0)  # 1 s a step
    for report in range(1, 6):
        clock.update(20 + 10 * report, 20.0 + 30.0 * report)  # now 3 s a step
        assert clock.seconds_per_step == pytest.approx(3.0 - 2.0 * 0.5**report)
    assert clock.estimate(100) == pytest.approx(100 * (3.0 - 2.0 / 32))


def test_no_steps_left_and_repeated_reports():
    clock = TimeLeft()
    clock.update(5, 5.0)
    clock.update(5, 6.0)  # the same step again (the last report of a run): no window
    assert clock.estimate(10) is None
    clock.update(10, 11.0)
    assert clock.estimate(0) == 0.0 and clock.estimate(-3) == 0.0


def test_smoothing_must_be_a_weight():
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="smoothing"):
            TimeLeft(bad)
