"""What "no rule applies in hidden mode only" means for one implementation, shared by the tests
that grade catalogued code (mutants, tutorial-style code) in both modes.

Visible and hidden checks run the same code (``tests/exercises/test_hidden_only_rules.py``
proves it); only the random inputs differ. So a rule that costs points in hidden mode must cost
them in visible mode too: code that the hidden checks reject, the visible checks reject, and
for the same reason: at the same check (:attr:`CheckResult.rule`), or with the same diagnosis
(its hint), since one bug may show at two places of a check depending on the input shapes (a
mask without its head axis gives wrong values for some shapes and a broadcast error for
others).
"""

from __future__ import annotations

from autograder.exercises.registry import CheckResult


def diagnosis(result: CheckResult) -> str:
    """The hint of a failure message, or ``""``."""
    return result.message.partition(" Hint: ")[2]


def site(result: CheckResult) -> str:
    """The check that failed, ``"ch04:271"``, without the toolkit function below it."""
    return (result.rule or "").split(" ")[0]


def hidden_only_failure(visible: CheckResult, hidden: CheckResult) -> str | None:
    """Why ``hidden`` fails by a rule that ``visible`` does not apply, or None."""
    if hidden.passed:
        return None
    if visible.passed:
        return f"the hidden checks reject it and the visible ones do not: {hidden.message}"
    if site(visible) == site(hidden) or (diagnosis(hidden) and diagnosis(hidden) ==
                                         diagnosis(visible)):
        return None
    return (f"the hidden checks reject it by another rule ({hidden.rule}) than the visible "
            f"ones ({visible.rule}): hidden {hidden.message!r}; visible {visible.message!r}")
