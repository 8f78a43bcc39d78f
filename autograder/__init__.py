"""Grading for the "Build the Transformer" course.

Notebook test cells call :func:`check`; other code uses :func:`grade_function` and
:func:`exercises`::

    from autograder import check, grade_function, exercises
    check("ch02.softmax", softmax)               # prints a line, or raises AssertionError
    r = grade_function("ch02.softmax", softmax, hidden=True)
    r.passed, r.message

Importing this package is cheap: chapter checks load on first use, and torch is never
imported here.
"""

import sys

# nbformat validates notebooks with jsonschema, which imports an optional IRI grammar that
# takes about a second to build; notebooks hold no IRI fields, and every grading process
# (one per learner) would pay that second again.
sys.modules.setdefault("rfc3987_syntax", None)

from autograder.exercises.registry import (  # noqa: E402
    CheckResult,
    check,
    exercises,
    get_exercise,
    grade_function,
)

__all__ = ["CheckResult", "check", "exercises", "get_exercise", "grade_function"]
