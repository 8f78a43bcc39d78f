"""What goes wrong on the learner's side of the wire, as the grader sees it.

Both ends of the grader's wire raise these: the peers (:mod:`autograder.sandbox.client`) and
the modules they mirror (:mod:`autograder.sandbox.remote_module`).
"""

from __future__ import annotations

import builtins
from typing import Any

# The learner's exceptions arrive by name; these keep their builtin type in the grader, so that
# ``expect_raises(fn, ValueError, ...)`` works. Any other name becomes a fresh class.
IDENTIFIER_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class WorkerFailedError(RuntimeError):
    """The learner's process died, timed out or broke the protocol (the message says which)."""


def rebuild_exception(reply: dict[str, Any]) -> Exception:
    """The learner's exception as the grader sees it: a builtin type when it is one, otherwise
    a fresh class of the same name; ``learner_line`` holds the learner's failing line."""
    name, message = str(reply.get("error", "Exception")), str(reply.get("message", ""))
    kind = getattr(builtins, name, None)
    exc: Exception | None = None
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            exc = kind(message)
        except TypeError:  # builtins such as UnicodeDecodeError need more arguments
            exc = None
    if exc is None:
        safe = name if name and set(name) <= IDENTIFIER_CHARACTERS and not name[0].isdigit() \
            else "LearnerError"
        exc = type(safe, (Exception,), {})(message)
    where = reply.get("where")
    exc.learner_line = where if isinstance(where, dict) else None  # type: ignore[attr-defined]
    return exc
