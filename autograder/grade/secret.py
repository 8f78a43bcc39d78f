"""Which secret a class is graded with, and the refusal to grade with one learners can read.

The hidden checks draw their inputs from the grading secret (:func:`autograder.exercises.
checking.seed_for`). A learner who knows it can rebuild those inputs and, with the reference in
reach, answer them from a table. So every way of grading (``python -m autograder autograde``,
plain ``nbgrader autograde``, the Formgrader's Autograde) first calls
:func:`require_grading_secret`, which accepts:

* ``AUTOGRADER_SECRET``: the secret itself, in the grader's environment; or
* ``AUTOGRADER_SECRET_FILE``: a file holding it, which only its owner may read (mode 0600). The
  class server keeps one in its state folder and gives its path to its grading service
  (:meth:`autograder.hub.classroom.Classroom.ensure_secret`);

and refuses, naming the variable and the fix, a secret that is unset, empty, the development
secret (which stands in the course's code), shorter than :data:`MIN_LENGTH` characters, or in a
file that others can read.

The development secret serves only the sample class of ``make demo`` and the tests, which say
so with ``AUTOGRADER_DEVELOPMENT=1`` (:func:`development_grading`); grading with it prints that
it is not for a class.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from autograder.exercises.checking import (
    DEVELOPMENT_SECRET,
    SECRET_ENV,
    SECRET_FILE_ENV,
    grading_secret,
)

DEVELOPMENT_ENV = "AUTOGRADER_DEVELOPMENT"
# A guessed secret could be checked against what feedback pages say about the hidden inputs
# (their shapes, say): a class's secret is long. `secrets.token_hex(32)` gives 64 characters.
MIN_LENGTH = 16
NEW_SECRET = "python3 -c 'import secrets; print(secrets.token_hex(32))'"
SET_A_SECRET = (
    f"On the class server (make hub) the class's grading service grades with the class's "
    f"secret for instructors and teaching assistants (the Formgrader's Autograde, `python -m "
    f"autograder autograde` in their JupyterLab's terminal); from a root shell there, run `sudo "
    f"{SECRET_FILE_ENV}=<state>/hub/autograder_secret python -m autograder ...` (`python -m "
    f"autograder hub secret` prints the path). Elsewhere, "
    f"export a long random secret of your own and keep it for the whole course: `export "
    f"{SECRET_ENV}=$({NEW_SECRET})`, or keep it in a file only you can read (chmod 600) and "
    f"export {SECRET_FILE_ENV}=<that file>.")
HOW_TO_SET = (f"{SET_A_SECRET} To grade the sample class or your own work, not a class, set "
              f"{DEVELOPMENT_ENV}=1.")


class SecretError(RuntimeError):
    """Grading was refused: the secret is missing or learners could read it."""


@dataclass(frozen=True)
class GradingSecret:
    """The secret a grading run uses, and where it came from (never the value itself)."""

    source: str  # "AUTOGRADER_SECRET", "AUTOGRADER_SECRET_FILE (<path>)" or "development"

    @property
    def development(self) -> bool:
        return self.source == "development"

    def notice(self) -> str:
        """One line for the instructor's log: which secret grades."""
        if self.development:
            return (f"grading with the development secret ({DEVELOPMENT_ENV}=1), which every "
                    "learner can read in the course's code: for the sample class of `make demo` "
                    f"and the tests only, never for a class. {SET_A_SECRET}")
        return f"grading with the class's secret from {self.source}"


def _file_problem(path: Path) -> str | None:
    """Why the secret file ``path`` is not one that only this user can read, or None."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if info.st_uid != os.geteuid():
        return f"belongs to another user (uid {info.st_uid}): `chown {os.geteuid()} {path}`"
    if info.st_mode & 0o077:
        return (f"can be read or written by others (mode {stat.S_IMODE(info.st_mode):o}): "
                f"`chmod 600 {path}`, then make a new secret, since others may have read it")
    return None


def require_grading_secret() -> GradingSecret:
    """The secret this process grades with, after checking that learners cannot read it.

    Raises:
        SecretError: the secret is unset, empty, the public development secret, too short,
            or in a file that others can read; the message names the variable and the fix.
    """
    if os.environ.get(SECRET_ENV):
        source = SECRET_ENV
    elif os.environ.get(SECRET_FILE_ENV):
        path = Path(os.environ[SECRET_FILE_ENV])
        problem = _file_problem(path)
        if problem:
            raise SecretError(f"not grading: the secret file {SECRET_FILE_ENV}={path} "
                                f"{problem}")
        source = f"{SECRET_FILE_ENV} ({path})"
    elif os.environ.get(DEVELOPMENT_ENV) == "1":
        return GradingSecret("development")
    else:
        raise SecretError(
            f"not grading: {SECRET_ENV} is not set, so the hidden checks would draw their inputs "
            "from the development secret, which every learner can read in the course's code. "
            + HOW_TO_SET)
    secret = grading_secret()
    if not secret:
        raise SecretError(f"not grading: {source} holds an empty secret. {HOW_TO_SET}")
    if secret == DEVELOPMENT_SECRET:
        raise SecretError(
            f"not grading: {source} holds the development secret, which every learner can read "
            f"in the course's code. Set a secret of your own instead. {HOW_TO_SET}")
    if len(secret) < MIN_LENGTH:
        raise SecretError(
            f"not grading: the secret in {source} has {len(secret)} characters, fewer than "
            f"{MIN_LENGTH}: a short one can be guessed. Make a long random one: {NEW_SECRET}")
    return GradingSecret(source)


@contextmanager
def development_grading() -> Iterator[None]:
    """Grade with the development secret inside the block, unless a class's secret is set:
    for the sample class of the demo and the benchmarks."""
    before = os.environ.get(DEVELOPMENT_ENV)
    os.environ[DEVELOPMENT_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[DEVELOPMENT_ENV]
        else:
            os.environ[DEVELOPMENT_ENV] = before
