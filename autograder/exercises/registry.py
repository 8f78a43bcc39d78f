"""The registry of graded exercises and the functions that grade a learner's function.

Chapter modules in :mod:`autograder.exercises.checks` add exercises with :func:`register`; the
registry imports them the first time it is asked (:func:`exercises`, :func:`get_exercise`,
:func:`grade_function`), so ``import autograder`` stays fast and never imports torch.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import textwrap
import traceback
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autograder.exercises.checking import (
    CHECKS_ENV,
    CheckContext,
    CheckFailure,
    LearnerError,
    collect_notes,
    describe,
    learner_namespace,
    seed_for,
)

CHAPTERS: dict[str, str] = {
    "ch01": "ch01_positional_encoding",
    "ch02": "ch02_attention",
    "ch03": "ch03_attention_head",
    "ch04": "ch04_multi_head_attention",
    "ch05": "ch05_layer_norm_ffn",
    "ch06": "ch06_encoder_block",
    "ch07": "ch07_pytorch_modules",
    "ch08": "ch08_decoder_and_model",
    "ch09": "ch09_training",
    "ch10": "ch10_translation",
    "ch11": "ch11_language_model",
    "ch12": "ch12_modern_llm",
}
DIFFICULTIES = ("easy", "medium", "hard")
_ID_PATTERN = re.compile(r"^(ch\d\d)\.[a-z_][a-z0-9_]*$")

CheckFunction = Callable[[CheckContext, Callable[..., Any]], None]


@dataclass(frozen=True)
class CheckResult:
    """The outcome of grading one function.

    Attributes:
        passed: whether every check passed (notes cost no points).
        message: what the learner reads: the success line followed by one ``"Note: ..."`` line
            per note, or the diagnosis of the first check that failed.
        notes: advice on a passing answer that costs no points (e.g. a float32 result that
            came back float64), each also a line of ``message``.
        rule: which rule of the checks failed, as ``"<check module>:<line> <toolkit function>"``
            (e.g. ``"ch04:271 expect_raises"``); None when passed. Visible and hidden checks
            run one code, so a failure's rule names the same check in both modes.
    """

    passed: bool
    message: str
    notes: tuple[str, ...] = ()
    rule: str | None = None


@dataclass(frozen=True)
class Exercise:
    """One graded exercise.

    Attributes:
        id: ``"<chapter prefix>.<function name>"``, e.g. ``"ch02.softmax"``.
        chapter: the chapter (assignment) id, e.g. ``"ch02_attention"``.
        title: a short human-readable title.
        points: points of the graded notebook cell.
        difficulty: ``"easy"``, ``"medium"`` or ``"hard"``.
        minutes: estimated time for a learner, in minutes.
        check: ``check(ctx, fn)``; raises :class:`CheckFailure` when ``fn`` is wrong.
        reference: ``"module:attribute"`` of the reference implementation.
        allowed: the building blocks the learner's code may use while this exercise is
            graded: ``"module:attribute"`` entries, or ``"module"`` for a whole module. Its
            process holds these (under the names the chapter's setup cell gives them) and what
            they import, nothing else of the course; none of it may reach ``reference``
            (``tests/exercises/test_allow_lists.py`` proves it).
        builders: ``"module:function"`` entries that build the models the checks hand to the
            learner's code (decoding exercises): the learner's process builds them from the
            weights the grader sends.
        depends: ids of earlier exercises whose functions the learner's code for this one
            calls by their names (chapter 2's attention calls the learner's softmax). When one
            of them fails, this one is judged with the error carried forward
            (:func:`carried_reference`), so that one mistake costs points once.
        isolated: judge this exercise on a wrong earlier one by isolation instead: the
            learner's code runs with the course's earlier pieces under their names in place of
            the learner's (:func:`isolated_check`). PyTorch modules built of the learner's
            earlier modules use it: carrying a module's error forward would need the
            reference built around the learner's own sub-modules, with their weights kept in
            step in two processes. The grader's sandboxed process swaps the learner's earlier
            definitions for the course's (:func:`autograder.grade.verify.substitutes`).
        answered_by: the other course modules whose code computes this exercise's answer: in
            another library (PyTorch for a NumPy exercise), or inside a larger function or
            class (a module built from the exercise's weights). A class's view holds them only
            once the exercise's chapter is closed, as it holds ``reference``
            (``tests/pipeline/test_sealed_view.py`` proves that nothing else in any view the
            course allows answers an exercise that is still open).
    """

    id: str
    chapter: str
    title: str
    points: int
    difficulty: str
    minutes: int
    check: CheckFunction
    reference: str
    allowed: tuple[str, ...] = ()
    builders: tuple[str, ...] = ()
    depends: tuple[str, ...] = ()
    isolated: bool = False
    answered_by: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The function's name in the exercise id (``"multi_head_attention"``)."""
        return self.id.split(".", 1)[1]

    @property
    def defines(self) -> str:
        """The name the solution defines: the reference's (``"MultiHeadAttention"``)."""
        return self.reference.partition(":")[2]

    def load_reference(self) -> Callable[..., Any]:
        """Import and return the reference implementation."""
        module, _, attribute = self.reference.partition(":")
        return getattr(importlib.import_module(module), attribute)


class UnknownExerciseError(KeyError, ValueError):
    """An exercise id that the registry does not hold; the message lists the valid ids."""

    def __str__(self) -> str:
        return str(self.args[0])


_REGISTRY: dict[str, Exercise] = {}
_loaded = False


def register(  # noqa: PLR0913 - one keyword per field of Exercise
    exercise_id: str,
    *,
    title: str,
    points: int,
    difficulty: str,
    minutes: int,
    reference: str,
    allowed: tuple[str, ...] = (),
    builders: tuple[str, ...] = (),
    depends: tuple[str, ...] = (),
    isolated: bool = False,
    answered_by: tuple[str, ...] = (),
) -> Callable[[CheckFunction], CheckFunction]:
    """Decorator that registers ``check(ctx, fn)`` as the check of ``exercise_id``.

    ``allowed``, ``builders``, ``depends``, ``isolated`` and ``answered_by``: see
    :class:`Exercise`.

    Raises:
        ValueError: malformed id, unknown chapter prefix, bad difficulty, non-positive points
            or minutes, a reference that is not ``"module:attribute"``, an allowed entry or a
            builder outside the course's packages, an ``answered_by`` entry that is not a
            module of ``transformer_ref``, an id registered twice by different functions, or
            ``depends`` naming an exercise of a later chapter.
    """
    match = _ID_PATTERN.match(exercise_id)
    if not match or match.group(1) not in CHAPTERS:
        raise ValueError(f"exercise id must look like 'ch02.softmax' with a chapter prefix in "
                         f"{sorted(CHAPTERS)}, got {exercise_id!r}")
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")
    if points <= 0 or minutes <= 0:
        raise ValueError(f"points and minutes must be positive, got {points} and {minutes}")
    if reference.count(":") != 1:
        raise ValueError(f"reference must be 'module:attribute', got {reference!r}")
    _check_links(exercise_id, allowed + builders, depends, answered_by)

    def decorator(check: CheckFunction) -> CheckFunction:
        old = _REGISTRY.get(exercise_id)
        if old is not None and _origin(old.check) != _origin(check):
            raise ValueError(f"exercise {exercise_id!r} is registered twice: by "
                             f"{'.'.join(_origin(old.check))} and {'.'.join(_origin(check))}")
        _REGISTRY[exercise_id] = Exercise(
            id=exercise_id, chapter=CHAPTERS[match.group(1)], title=title, points=points,
            difficulty=difficulty, minutes=minutes, check=check, reference=reference,
            allowed=tuple(allowed), builders=tuple(builders), depends=tuple(depends),
            isolated=isolated, answered_by=tuple(answered_by),
        )
        return check

    return decorator


def _check_links(exercise_id: str, modules: tuple[str, ...], depends: tuple[str, ...],
                 answered_by: tuple[str, ...]) -> None:
    """Refuse links of ``exercise_id`` that name no course code or a later exercise
    (``modules``: its allowed entries and builders)."""
    for earlier in depends:
        earlier_match = _ID_PATTERN.match(earlier)
        if not earlier_match or earlier_match.group(1) > exercise_id[:4]:
            raise ValueError(f"depends must name exercises of this or an earlier chapter, "
                             f"got {earlier!r} for {exercise_id!r}")
    for entry in modules:
        if entry.split(".")[0] not in ("transformer_ref", "autograder") or entry.count(":") > 1:
            raise ValueError(f"allowed entries and builders must be 'module:attribute' or "
                             f"'module' of transformer_ref or autograder, got {entry!r}")
    for module in answered_by:
        if not module.startswith("transformer_ref.") or ":" in module:
            raise ValueError(f"answered_by entries must be modules of transformer_ref, "
                             f"got {module!r}")


def _origin(check: CheckFunction) -> tuple[str, str]:
    return check.__module__, check.__qualname__


def _load_chapters() -> None:
    global _loaded
    if _loaded:
        return
    from autograder.exercises import checks as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if re.fullmatch(r"ch\d\d", info.name):
            importlib.import_module(f"{package.__name__}.{info.name}")
    _loaded = True


def _order(exercise: Exercise) -> tuple[str, int]:
    # Chapter first, then the order of the check functions in their module (the notebook order).
    return exercise.id.split(".")[0], exercise.check.__code__.co_firstlineno


def all_exercises() -> list[Exercise]:
    """Every registered exercise, by chapter and then in notebook order."""
    _load_chapters()
    return sorted(_REGISTRY.values(), key=_order)


def exercises() -> list[str]:
    """The ids of every registered exercise, by chapter and then in notebook order."""
    return [exercise.id for exercise in all_exercises()]


def get_exercise(exercise_id: str) -> Exercise:
    """The :class:`Exercise` registered as ``exercise_id``.

    Raises:
        UnknownExerciseError (a KeyError and a ValueError): the id is not registered.
    """
    _load_chapters()
    try:
        return _REGISTRY[exercise_id]
    except (KeyError, TypeError):
        raise UnknownExerciseError(
            f"unknown exercise id {exercise_id!r}; valid ids are: {', '.join(exercises())}"
        ) from None


def grade_function(exercise_id: str, fn: Any, hidden: bool = False,
                   earlier: Mapping[str, Any] | None = None) -> CheckResult:
    """Grade the learner's ``fn`` with the checks of ``exercise_id``.

    Never raises because of ``fn``: exceptions inside it, wrong return types or shapes, NaN,
    or a ``fn`` that is not callable all give ``passed=False`` and a message saying what was
    expected and what was given.

    Args:
        exercise_id: a registry id, see :func:`exercises`.
        fn: the learner's function.
        hidden: run the hidden checks (inputs drawn from a seed derived from
            ``AUTOGRADER_SECRET``) instead of the visible ones (fixed seed).
        earlier: the learner's functions of the exercise's ``depends``, by exercise id. When
            ``fn`` fails and one of them fails its own checks, ``fn`` passes if it is right
            given them (error carried forward, :func:`carried_reference`) or, for an
            ``isolated`` exercise, with the course's in their place (:func:`isolated_check`),
            with a note that says so: one mistake costs the points of its own exercise only.

    Raises:
        UnknownExerciseError: ``exercise_id`` is not registered (a mistake of the caller).
    """
    exercise = get_exercise(exercise_id)
    if not callable(fn):
        return CheckResult(False, _not_callable(exercise.id, fn, hidden))
    result = _run_check(exercise, fn, hidden, exercise.load_reference())
    mine = {d: f for d, f in (earlier or {}).items() if d in exercise.depends and callable(f)}
    if result.passed or not exercise.depends or set(mine) != set(exercise.depends):
        return result
    wrong = [d for d in exercise.depends if not grade_function(d, mine[d], hidden).passed]
    if not wrong:
        return result
    if exercise.isolated:
        return isolated_check(exercise, fn, hidden, wrong, result)
    given = _run_check(exercise, fn, hidden, carried_reference(exercise, mine))
    if not given.passed:
        return result
    return _on_its_own_merit(given, exercise, wrong, "given your {names}")


def _on_its_own_merit(given: CheckResult, exercise: Exercise, wrong: list[str],
                      how: str) -> CheckResult:
    """``given`` (a pass of ``exercise`` judged apart from its ``wrong`` earlier exercises)
    with a note that says so; ``how`` names how it was judged (``"given your {names}"``)."""
    names, wrong_words = _wrong_words(wrong)
    note = (f"your {exercise.defines} is right {how.format(names=names)}; your {names} "
            f"{wrong_words}, which costs points there only.")
    return CheckResult(True, "\n".join([given.message, f"Note: {note}"]),
                       notes=(*given.notes, note))


def _wrong_words(wrong: list[str]) -> tuple[str, str]:
    """The names the ``wrong`` exercises define (``"softmax"``), and ``"is wrong (see its
    cell)"`` or its plural."""
    names = " and ".join(get_exercise(d).defines for d in wrong)
    return names, ("is wrong (see its cell)" if len(wrong) == 1
                   else "are wrong (see their cells)")


def carried_reference(exercise: Exercise, earlier: Mapping[str, Any]) -> Callable[..., Any]:
    """The reference of ``exercise`` by its own steps with the learner's ``earlier`` functions
    (by exercise id) in place of the course's: the reference's code, run where the earlier
    exercises' names are the learner's. It runs in the grader, which calls the learner's
    functions (through the sandbox's wire, values only, when grading)."""
    reference = inspect.unwrap(exercise.load_reference())
    names = {get_exercise(d).defines: fn for d, fn in earlier.items()}
    carried = types.FunctionType(reference.__code__, {**reference.__globals__, **names},
                                 reference.__name__, reference.__defaults__,
                                 reference.__closure__)
    carried.__kwdefaults__ = reference.__kwdefaults__
    return carried


def isolated_check(exercise: Exercise, fn: Any, hidden: bool, wrong: list[str],
                   result: CheckResult) -> CheckResult:
    """Isolation: the checks of ``exercise`` on the learner's ``fn`` run again with the
    course's references of the ``wrong`` earlier exercises under their names in the namespace
    ``fn`` reads them from (the notebook's), which is restored afterwards; ``result`` is the
    failure with the learner's own earlier pieces. A failure again is the later code's own
    mistake, reported as grading finds it: with the course's pieces.

    Where the course holds no such piece for the learner's code (a class's checking service,
    whose learners' views lack the answers of open exercises), the failure comes back with a
    note that grading runs it with the course's pieces, as the grader's process does."""
    names, wrong_words = _wrong_words(wrong)
    namespace = learner_namespace(fn)
    if namespace is None:
        note = (f"your {names} {wrong_words} and your {exercise.defines} uses "
                f"{names}. When grading, your {exercise.defines} runs with the course's "
                f"{names} in place of yours, so that one mistake costs points once; these "
                f"checks cannot do that while the chapter is open: correct your {names} first.")
        return CheckResult(False, f"{result.message} Note: {note}", result.notes, result.rule)
    swapped = {get_exercise(d).defines: get_exercise(d).load_reference() for d in wrong}
    saved = {name: namespace[name] for name in swapped if name in namespace}
    namespace.update(swapped)
    try:
        given = _run_check(exercise, fn, hidden, exercise.load_reference())
    finally:
        for name in swapped:
            namespace.pop(name, None)
        namespace.update(saved)
    if not given.passed:
        note = (f"your {exercise.defines} fails with the course's {names} in place of yours as "
                f"well, so this mistake is its own (your {names} {wrong_words}).")
        return CheckResult(False, f"{given.message} Note: {note}", given.notes, given.rule)
    return _on_its_own_merit(given, exercise, wrong, "with the course's {names} in place of yours")


def _run_check(exercise: Exercise, fn: Callable[..., Any], hidden: bool,
               reference: Callable[..., Any]) -> CheckResult:
    """The checks of ``exercise`` on ``fn``, against ``reference``."""
    prefix = _prefix(exercise.id, hidden)
    context = CheckContext(
        exercise_id=exercise.id,
        hidden=hidden,
        rng=np.random.default_rng(seed_for(exercise.id, hidden)),
        reference=reference,
    )
    try:
        # Overflow warnings from learner code would only repeat what the message says.
        with np.errstate(all="ignore"), collect_notes() as notes:
            exercise.check(context, fn)
    except CheckFailure as exc:
        return CheckResult(False, f"{prefix} failed: {exc}", rule=failed_rule(exc))
    except Exception as exc:  # an odd return value can break a check anywhere
        return CheckResult(False, f"{prefix} failed: the check stopped with "
                                  f"{type(exc).__name__}: {exc}. Look at what your function "
                                  f"returns (types and shapes) against its docstring.",
                           rule=f"{failed_rule(exc)} {type(exc).__name__}")
    lines = [f"{prefix}: all passed."] + [f"Note: {text}" for text in notes.values()]
    return CheckResult(True, "\n".join(lines), notes=tuple(notes.values()))


def earlier_functions(exercise: Exercise, fn: Any) -> dict[str, Any]:
    """The learner's functions of ``exercise.depends`` that ``fn`` calls by name: those of the
    namespace ``fn`` was defined in (the notebook's), by exercise id."""
    namespace = learner_namespace(fn) or {}
    found = {}
    for earlier in exercise.depends:
        value = namespace.get(get_exercise(earlier).defines)
        if callable(value):
            found[earlier] = value
    return found


_EXERCISES_DIR = Path(__file__).resolve().parent


def failed_rule(exc: BaseException) -> str:
    """Where in the checks ``exc`` stopped them: the last line of a chapter's check module on
    its way (``"ch04:271"``) and the toolkit function below it that raised
    (``"expect_raises"``; ``"learner_error"`` when the learner's code raised), e.g.
    ``"ch04:271 expect_raises"``."""
    site, raiser = "check", ""
    for frame, line in traceback.walk_tb(exc.__traceback__):
        path = Path(frame.f_code.co_filename).resolve()
        if path.parent == _EXERCISES_DIR / "checks":
            site, raiser = f"{path.stem}:{line}", ""
        elif path.parent == _EXERCISES_DIR and frame.f_code.co_name not in ("fail", "call"):
            raiser = raiser or frame.f_code.co_name
    if isinstance(exc, LearnerError):  # the learner's code raised, wherever it was called
        raiser = "learner_error"
    return f"{site} {raiser}".strip()


def _prefix(exercise_id: str, hidden: bool) -> str:
    return f"{exercise_id} ({'hidden' if hidden else 'visible'} checks)"


def _not_callable(exercise_id: str, fn: Any, hidden: bool) -> str:
    return (f"{_prefix(exercise_id, hidden)}: expected a function, got {describe(fn)}. Pass the "
            "function itself, without calling it.")


def _borrowed(fn: Any, reference: Any) -> str:
    """How ``fn`` is the reference itself (``"exactly"``, ``"a subclass of"``), or ``""``.

    A courtesy to learners in their notebook, where the reference is importable: the grader
    itself never relies on it, since the learner's process for an exercise cannot reach the
    exercise's reference at all. A copy of the reference's code is not the reference: it is
    graded like any answer, in every chapter the same, and copy detection flags it for the
    instructor (:mod:`autograder.copies`).
    """
    if fn is reference:
        return "exactly"
    if isinstance(fn, type) and isinstance(reference, type) and issubclass(fn, reference):
        return "a subclass of"
    return ""


class CheckFailed(AssertionError):  # noqa: N818 - what a learner reads: the check failed
    """A check that failed in a notebook test cell; ``str(exc)`` is the message.

    Jupyter shows it as the message alone, the check's sentence first, instead of a traceback
    through the grader (IPython asks an exception for ``_render_traceback_``); the cell still
    ends with an error, so nbgrader scores it 0.
    """

    def _render_traceback_(self) -> list[str]:
        return render_failure(str(self))


RED, BOLD, RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"


def render_failure(message: str, width: int = 100) -> list[str]:
    """The lines a notebook shows for a failed check: the headline (``"... failed:"``) in bold
    red, then the diagnosis and the hint as wrapped paragraphs."""
    head, colon, body = message.partition(" failed: ")
    if not colon:
        head, body = message, ""
    lines = [f"{BOLD}{RED}{head}{' failed:' if colon else ''}{RESET}"]
    diagnosis, hint_marker, hint = body.partition(" Hint: ")
    for paragraph in (diagnosis, f"Hint: {hint}" if hint_marker else ""):
        if paragraph:
            lines += textwrap.wrap(paragraph, width, break_long_words=False,
                                   break_on_hyphens=False)
    return lines


def _checked_by_service(exercise_id: str, fn: Any, hidden: bool) -> CheckResult:
    """The result of the class's checking service for ``fn``, as :func:`grade_function`'s.

    Raises:
        CheckFailed: ``fn`` is not a function (only functions travel to the service).
        UnknownExerciseError: the service holds no such exercise.
    """
    from autograder.learner.remote_check import remote_check

    if not callable(fn):
        raise CheckFailed(_not_callable(exercise_id, fn, hidden))
    verdict = remote_check(exercise_id, fn, hidden)
    if verdict.get("unknown"):
        raise UnknownExerciseError(str(verdict.get("message")))
    return CheckResult(bool(verdict.get("passed")), str(verdict.get("message")),
                       notes=tuple(str(n) for n in verdict.get("notes", [])))


def render_pass(result: CheckResult, width: int = 100) -> str:
    """What a notebook prints for a passed check: the success line, then each note as a
    wrapped paragraph starting ``Note:`` (plain text: the feedback page shows it as printed)."""
    head = result.message.split("\n", 1)[0]
    notes = [textwrap.fill(f"Note: {text}", width, break_long_words=False,
                           break_on_hyphens=False) for text in result.notes]
    return "\n".join([head, *notes])


def check(exercise_id: str, fn: Any, hidden: bool = False) -> None:
    """Notebook test cells: print a success line (and the notes of a passing answer, which
    cost no points), or raise :class:`CheckFailed` (an AssertionError) with the diagnosis.

    In a class, the learner's view of the course holds no checks: the class's checking service
    runs them (:mod:`autograder.learner.remote_check`), with the same verdict and message.

    Raises:
        CheckFailed: the function failed a check (nbgrader then scores the cell 0).
        UnknownExerciseError: ``exercise_id`` is not registered.
        CheckingServiceError: in a class, the checking service did not answer.
    """
    _load_chapters()
    if exercise_id not in _REGISTRY and os.environ.get(CHECKS_ENV):
        result = _checked_by_service(exercise_id, fn, hidden)
    else:
        exercise = get_exercise(exercise_id)
        borrowed = _borrowed(fn, exercise.load_reference())
        if borrowed:
            raise CheckFailed(
                f"{exercise.id} failed: you passed {borrowed} the course's own "
                f"{exercise.defines} ({exercise.reference.partition(':')[0]}). Write your own: "
                f"when this exercise is graded, your code runs where the course's "
                f"{exercise.defines} is not available, so this scores 0.")
        result = grade_function(exercise_id, fn, hidden=hidden,
                                earlier=earlier_functions(exercise, fn))
    if not result.passed:
        raise CheckFailed(result.message)
    print(render_pass(result))
