"""The classes' secrets (``AUTOGRADER_SECRET``) under which the catalogued code marked
``every_secret`` is judged, shared by the tests that grade it (mutants, tutorial-style code).

A valid alternative is judged under each of the 20: rejected under any one class's secret, it
would cost that class's learners points for a right answer. So is a bug whose exercise has fewer
than three such bugs. Where an exercise has three or more, each is judged under 8 consecutive
secrets, the next bug under the next 8 (wrapping around): every one of the 20 still judges some
bug of every exercise, and each bug meets 8 sets of hidden inputs. The hardest exercises' checks
take seconds a grading, and 20 for every bug made these tests the suite's slowest.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.fixtures.mutants import Mutant

SECRETS = [f"secret number {i}" for i in range(20)]
SECRETS_PER_BUG = 8


def secrets_for(code: Mutant, catalogue: Sequence[Mutant]) -> list[str]:
    """The secrets ``code`` of ``catalogue`` (the code judged under every secret) is judged
    under."""
    bugs = [c for c in catalogue if c.exercise == code.exercise and not c.valid]
    if code.valid or len(bugs) * SECRETS_PER_BUG < len(SECRETS):
        return SECRETS
    start = bugs.index(code) * SECRETS_PER_BUG
    return [SECRETS[(start + i) % len(SECRETS)] for i in range(SECRETS_PER_BUG)]
