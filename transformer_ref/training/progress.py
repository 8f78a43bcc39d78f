"""How long a training run has left, estimated from its recent steps.

The first steps of a run are slow for reasons that do not repeat: memory is allocated, kernels
are chosen and the first optimizer step imports parts of PyTorch. An average over the whole run
so far carries that cost into every estimate, and early ones came out several times too long.
:class:`TimeLeft` therefore ignores the first report's window of steps and follows the speed of
the later ones with an exponential moving average, so that it also catches up when the machine
gets busier or quieter::

    clock = TimeLeft()
    clock.update(step=25, seconds=40.0)     # start-up: not used for the estimate
    clock.describe(steps_left=675)          # 'estimating the time left'
    clock.update(step=50, seconds=57.5)     # 0.7 s a step
    clock.describe(steps_left=650)          # 'about 455 s to go'
"""

from __future__ import annotations

SMOOTHING = 0.5  # weight of the newest window in the moving average of seconds per step


class TimeLeft:
    """Seconds per step, averaged over the recent report windows.

    Args:
        smoothing: weight of the newest window, in (0, 1]; 1 uses the last window only.
    """

    def __init__(self, smoothing: float = SMOOTHING) -> None:
        if not 0.0 < smoothing <= 1.0:
            raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
        self.smoothing = smoothing
        self.seconds_per_step: float | None = None
        self._last: tuple[int, float] | None = None

    def update(self, step: int, seconds: float) -> None:
        """Record a report: ``step`` steps done after ``seconds`` of training in all.

        The first call only marks where the start-up ends; each later call folds the steps
        since the previous one into the average.
        """
        if self._last is not None and step > self._last[0]:
            window = (seconds - self._last[1]) / (step - self._last[0])
            if self.seconds_per_step is None:
                self.seconds_per_step = window
            else:
                self.seconds_per_step += self.smoothing * (window - self.seconds_per_step)
        self._last = (step, seconds)

    def estimate(self, steps_left: int) -> float | None:
        """Seconds for ``steps_left`` more steps, or None while no window has been timed."""
        if self.seconds_per_step is None:
            return None
        return max(steps_left, 0) * self.seconds_per_step

    def describe(self, steps_left: int) -> str:
        """``'about N s to go'``, or ``'estimating the time left'`` before the first estimate."""
        left = self.estimate(steps_left)
        return "estimating the time left" if left is None else f"about {left:.0f} s to go"
