"""Modules that gather names from others, and load each one only when it is first used.

Why the reference is one exercise per module: when an exercise is graded, the learner's code
runs in a process that holds the course's building blocks of *earlier* exercises but not the
reference answer of the exercise itself (see ``autograder/exercises/reach.py``). In a class,
the learners' own view of the course holds the same building blocks, without the answers of
the chapters that are still open. Both need each answer in a module of its own, and the
gathering modules (``transformer_ref.modules``, ``np_attention``, ``np_layers``, ``masks``,
``decoding``, on top of the subpackages that define the names, and the package itself, which
lends their union) give the short imports the chapters use::

    from transformer_ref.modules import MultiHeadAttention, make_model

A gathering module imports nothing until a name is asked for, and then only the module that
defines it, so importing one building block never brings an answer along.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any


def lend(module: str, sources: dict[str, tuple[str, ...]],
         ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for the gathering module ``module``, which
    offers each name of ``sources[defining_module]`` from ``defining_module``.

    Usage, in the gathering module::

        __getattr__, __dir__, __all__ = lend(__name__, {
            "transformer_ref.numpy.heads": ("split_heads", "merge_heads"),
        })
    """
    where = {name: source for source, names in sources.items() for name in names}

    def getattr_(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(import_module(where[name]), name)
        setattr(sys.modules[module], name, value)  # the next use is a plain attribute
        return value

    def dir_() -> list[str]:
        return sorted(where)

    return getattr_, dir_, list(where)
