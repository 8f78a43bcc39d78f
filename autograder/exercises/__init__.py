"""The graded exercises: the registry, the helpers that checks are written with, and the
checks of each chapter (:mod:`autograder.exercises.checks`).

``from autograder import exercises`` is the function that lists exercise ids; this package is
reached as ``from autograder.exercises import registry`` (or ``from
autograder.exercises.registry import ...``).
"""
