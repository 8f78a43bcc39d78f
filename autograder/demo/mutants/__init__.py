"""Mutants: realistic buggy implementations and valid alternatives of the graded exercises.

Each chapter module (``ch01.py`` ... ``ch11.py``) defines plain functions and lists them in a
module-level ``MUTANTS`` list::

    MUTANTS = [
        Mutant("ch02.softmax", "softmax over axis 0", softmax_axis0, False, "sum to 1"),
        Mutant("ch02.softmax", "loop over rows", softmax_loop, True, None),
    ]

``valid=False`` marks a bug: the checks must reject it in visible and in hidden mode, by the
same rule (:attr:`~autograder.exercises.registry.CheckResult.rule`: no rule applies in hidden
mode only), and when ``hint`` is given the failure message must contain that substring.
``valid=True`` marks a correct alternative that both modes must accept; when ``note`` is given,
with a note (advice that costs no points) that contains it. ``every_secret=True`` asks for more: the
verdict (and the hint) must hold in hidden mode under many values of ``AUTOGRADER_SECRET``
(``tests/class_secrets.py``: each of 20, or 8 of them for a bug whose exercise has three or more
such bugs, which share the 20 out), so that the check judges it whatever the random draws.
``tests/demo/test_mutants.py`` runs every mutant returned by :func:`all_mutants` through
:func:`autograder.grade_function`.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Mutant:
    """One implementation of an exercise that the checks must judge correctly.

    Attributes:
        exercise: the registry id, e.g. ``"ch02.softmax"``.
        name: what the implementation does, e.g. ``"softmax over axis 0"``.
        fn: the implementation, with the exercise's signature.
        valid: True for a correct alternative, False for a bug.
        hint: for bugs, a substring the failure message must contain (None: no requirement).
        every_secret: judged under many hidden secrets too, not only under the default one
            (``tests/class_secrets.py``).
        note: for valid alternatives, a substring of the note the passing message must hold
            (None: it passes without a note).
    """

    exercise: str
    name: str
    fn: Callable[..., Any]
    valid: bool
    hint: str | None = None
    every_secret: bool = False
    note: str | None = None

    @property
    def id(self) -> str:
        """A stable test id: ``"ch02.softmax: softmax over axis 0"``."""
        return f"{self.exercise}: {self.name}"


def all_mutants() -> list[Mutant]:
    """The ``MUTANTS`` of every chapter module of this package, by chapter."""
    found: list[Mutant] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if re.fullmatch(r"ch\d\d", info.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.extend(module.MUTANTS)
    return found
