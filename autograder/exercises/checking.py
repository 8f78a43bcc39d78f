"""The toolkit that check functions are written with.

A check function receives a :class:`CheckContext` and the learner's callable. It calls the
learner's code through :func:`call` (exceptions become :class:`CheckFailure` with the
exception's type and message), validates what came back with :func:`expect_tuple`,
:func:`expect_array` and :func:`compare`, and reports problems by raising
:class:`CheckFailure`, whose text is the message the learner reads.

Comparisons use the course tolerances (``rtol=1e-4, atol=1e-5`` for float64 results,
``rtol=1e-3, atol=1e-4`` for float32 ones) and name the largest error, its index and both
values. A :class:`Hint` recognises the output of a known bug (by computing what the buggy
formula gives, or with a predicate) and adds a targeted sentence to the message.

Advice that costs no points (a float32 result that came back float64 with the right values) is
a note: :func:`note` records it while the check goes on, and a check that passes shows its
notes with the success line.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import os
import re
import sys
import traceback
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

# The class's secret: its value, or (the class server's way) a file that holds it.
SECRET_ENV = "AUTOGRADER_SECRET"
# In a class, where the class's checking service runs the visible checks: its socket's path, or
# tcp://HOST:PORT (see autograder.learner.remote_check).
CHECKS_ENV = "TRANSFORMER_CHECKS"
SECRET_FILE_ENV = "AUTOGRADER_SECRET_FILE"
# Used when neither is set, so that the demo, the tests and an instructor's own runs of the
# solution notebooks work out of the box. Anyone can read it here, so a class is never graded
# with it (autograder.grade.secret refuses to).
DEVELOPMENT_SECRET = "build-the-transformer-development-secret"

FLOAT64_TOLERANCE = (1e-4, 1e-5)
FLOAT32_TOLERANCE = (1e-3, 1e-4)


class CheckFailure(Exception):  # noqa: N818 - a failed check, not an error of the grader
    """A check did not pass; ``str(exc)`` is the message shown to the learner."""


def fail(message: str) -> NoReturn:
    """Stop the check with ``message`` for the learner."""
    raise CheckFailure(message)


def grading_secret() -> str | None:
    """The class's secret: ``$AUTOGRADER_SECRET``, else the first line of the file
    ``$AUTOGRADER_SECRET_FILE`` names; None when neither is set (or both are empty).

    Raises:
        OSError: ``AUTOGRADER_SECRET_FILE`` names a file that cannot be read. Grading never
            falls back to the development secret because of a missing file.
    """
    value = os.environ.get(SECRET_ENV)
    if value:
        return value
    path = os.environ.get(SECRET_FILE_ENV)
    if not path:
        return None
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return (lines[0].strip() if lines else "") or None


# The notes of the check that is running: None outside one (see collect_notes).
_NOTES: ContextVar[dict[Any, str] | None] = ContextVar("autograder_check_notes", default=None)


def note(key: Any, message: str) -> None:
    """Record advice that costs no points: the check goes on, and if it passes, the learner
    reads ``message`` under the success line (in the notebook and in the feedback).

    Args:
        key: notes with equal keys are one note (the first message is kept), so that a rule
            met by several results of one check is told once.
        message: the whole note, a sentence or two that say what and how to change it.
    """
    notes = _NOTES.get()
    if notes is not None:
        notes.setdefault(key, message)


@contextmanager
def collect_notes() -> Iterator[dict[Any, str]]:
    """Within the block, :func:`note` records into the dict yielded (key -> message)."""
    notes: dict[Any, str] = {}
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def seed_for(exercise_id: str, hidden: bool) -> int:
    """The 64-bit seed of an exercise's random inputs.

    Visible mode: fixed per exercise, so every learner sees the same inputs and messages.
    Hidden mode: derived from ``sha256(secret + exercise_id)``, the secret being
    :func:`grading_secret`, else the development default :data:`DEVELOPMENT_SECRET`.
    """
    if hidden:
        secret = grading_secret() or DEVELOPMENT_SECRET
        material = f"{secret}\0{exercise_id}"
    else:
        material = f"visible\0{exercise_id}"
    return int.from_bytes(hashlib.sha256(material.encode()).digest()[:8], "little")


@dataclass(frozen=True)
class CheckContext:
    """What a check function gets besides the learner's callable.

    Attributes:
        exercise_id: the registry id, e.g. ``"ch02.softmax"``.
        hidden: True for the hidden (instructor) checks, False for the visible ones.
        rng: random generator seeded by :func:`seed_for`; draw inputs *and* shapes from it.
        reference: the reference implementation from ``transformer_ref``.
    """

    exercise_id: str
    hidden: bool
    rng: np.random.Generator
    reference: Callable[..., Any]


# ----------------------------------------------------------------------------- descriptions


def describe(value: Any) -> str:
    """A short phrase for a value in a message: ``"a float64 array of shape (2, 3)"``."""
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    if value is None:
        return "None"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, (bool, int, float, np.generic)):
        return f"{type(value).__name__} {value!r}"
    return f"an object of type {type(value).__module__}.{type(value).__qualname__}"


def _describe_argument(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"<{value.dtype} array {value.shape}>"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe_argument(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)) and len(value) > 4:
        return f"<{type(value).__name__} of {len(value)} items>"
    if isinstance(value, list):
        return "[" + ", ".join(_describe_argument(v) for v in value) + "]"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe_call(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    """``"softmax(<float64 array (2, 3)>, axis=0)"``: how the learner's function was called."""
    name = getattr(fn, "__name__", "your function")
    parts = [_describe_argument(a) for a in args]
    parts += [f"{k}={_describe_argument(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


# ----------------------------------------------------------------------------- calling


def _first_change(before: Any, after: Any, path: str) -> str | None:
    """The path of the first array inside ``after`` that differs from its copy ``before``."""
    if isinstance(after, np.ndarray):
        same = before.shape == after.shape and np.array_equal(before, after, equal_nan=True)
        return None if same else path
    if isinstance(after, dict):
        for key in after:
            found = _first_change(before.get(key), after[key], f"{path}[{key!r}]")
            if found:
                return found
    if isinstance(after, (list, tuple)):
        for i, (b, a) in enumerate(zip(before, after, strict=False)):
            found = _first_change(b, a, f"{path}[{i}]")
            if found:
                return found
    return None


@dataclass(frozen=True)
class ErrorHint:
    """A sentence added to the message when the learner's code raised a known kind of error.

    Attributes:
        message: the sentence.
        errors: names of the exception types it explains (``"ValueError"``, ...).
        pattern: a regular expression that the exception's message must contain.
        line: a regular expression that the learner's failing line must contain, or None.
        test: a further condition on the exception's message, or None.
    """

    message: str
    errors: tuple[str, ...]
    pattern: str = ""
    line: str | None = None
    test: Callable[[str], bool] | None = None

    def matches(self, error: BaseException) -> bool:
        text = str(error)
        if type(error).__name__ not in self.errors or not re.search(self.pattern, text):
            return False
        if self.test is not None and not self.test(text):
            return False
        if self.line is None:
            return True
        where = learner_location(error)
        return where is not None and bool(re.search(self.line, where.get("text") or ""))


def _axis_dropped(text: str) -> bool:
    """Whether a broadcast error names two shapes, one of them the other with an axis removed
    (what a reduction without keepdims leaves)."""
    shapes = [tuple(int(n) for n in re.findall(r"\d+", s))
              for s in re.findall(r"\(([\d,\s]*)\)", text)]
    return any(len(a) == len(b) + 1 and any(a[:i] + a[i + 1:] == b for i in range(len(a)))
               for a in shapes for b in shapes)


# Mistakes that learners' code commonly raises, in any chapter; the first match is used.
COMMON_ERROR_HINTS = (
    ErrorHint("`.T` reverses every axis of a batched array, not only the last two: swap the "
              "last two axes with np.swapaxes(k, -1, -2) (or k.swapaxes(-1, -2)).",
              ("ValueError",), r"matmul: .*mismatch in its core dimension", line=r"\.T\b"),
    ErrorHint("a reduction (max, sum, mean, var) without keepdims=True drops its axis, so the "
              "result no longer lines up with the array it came from: pass keepdims=True.",
              ("ValueError",), r"could not be broadcast together", test=_axis_dropped),
    ErrorHint("the new shape does not hold the array's elements: take the leading sizes from "
              "the array instead of assuming a fixed number of axes, e.g. "
              "`*lead, n, d = x.shape` and then `x.reshape(*lead, n, h, d // h)`.",
              ("ValueError", "RuntimeError"), r"cannot reshape array of size|is invalid for "
              r"input of size"),
    ErrorHint("a transpose with an explicit list of axes needs one entry per axis, so it fits "
              "one number of batch axes only: swap two axes counted from the end instead, "
              "np.swapaxes(x, -2, -3) (in torch x.transpose(-2, -3)).",
              ("ValueError", "RuntimeError"), r"axes don't match array|number of dims don't "
              r"match in permute"),
    ErrorHint("the code unpacks a shape into a fixed number of names, but the inputs here have "
              "another number of leading (batch) axes: take sizes from the end, e.g. "
              "`*batch, n, d = x.shape` or `x.shape[-1]`.",
              ("ValueError",), r"(too many|not enough) values to unpack"),
    ErrorHint("torch tensors have no .astype: convert with .to(dtype) (e.g. x.to(torch.float64)) "
              "or .bool(), .long(), .double().", ("AttributeError",),
              r"'Tensor' object has no attribute 'astype'"),
    ErrorHint("after transpose a tensor is no longer contiguous, so .view cannot merge its "
              "axes: use .reshape(...) (or .contiguous().view(...)).", ("RuntimeError",),
              r"view size is not compatible"),
    ErrorHint("two tensors of different dtypes meet: the grader runs your module in float64, "
              "so a tensor created inside forward with the default float32 does not fit. "
              "Create new tensors with dtype=x.dtype (and device=x.device) or torch.zeros_like.",
              ("RuntimeError",), r"same dtype|expected scalar type|expected m1 and m2"),
    ErrorHint("`~mask` needs a boolean mask, and masks may come as 0/1 numbers: convert first "
              "with np.asarray(mask, dtype=bool).", ("TypeError",),
              r"ufunc 'invert' not supported"),
    ErrorHint("`~mask` needs a bool tensor: convert a 0/1 mask with mask.bool() first (or "
              "compare, mask == 0).", ("TypeError",), r"operator.invert\) is only implemented"),
    ErrorHint("`if`, `and`, `or` and `not` need a single truth value, not an array: use "
              "np.where / torch.where for element-wise choices and & | for masks.",
              ("ValueError", "RuntimeError"), r"(truth|Boolean) value of .* is ambiguous"),
    ErrorHint("a value is None: an optional argument used without a check (mask=None means "
              "no mask: `if mask is not None:`), or a helper without `return`.",
              ("TypeError", "AttributeError"), r"'NoneType'"),
)


def learner_namespace(fn: Any) -> dict[str, Any] | None:
    """The namespace the learner's function or class ``fn`` reads global names from (the
    notebook's), or None when ``fn`` lives in another process."""
    if isinstance(fn, type):
        methods = [inspect.unwrap(getattr(v, "__func__", v)) for v in vars(fn).values()]
        fn = next((m for m in methods if isinstance(m, types.FunctionType)), None)
    return fn.__globals__ if isinstance(fn, types.FunctionType) else None


def learner_location(error: BaseException) -> dict[str, Any] | None:
    """Where the learner's code raised ``error``: ``{"line", "text", "function"}`` of the
    innermost line of the learner's own code, or None.

    In a learner's sandboxed process that line comes with the error (``learner_line``);
    for a local function it is the innermost frame outside Python's libraries and the
    course's own packages (the tutorial-style code of :mod:`autograder.tutorial_style`, which
    the tests grade, counts as learner code).
    """
    where = getattr(error, "learner_line", None)
    if isinstance(where, dict):
        return where
    found = None
    for frame in traceback.extract_tb(error.__traceback__):
        if _is_learner_file(frame.filename):
            found = frame
    if found is None:
        return None
    return {"line": found.lineno, "text": (found.line or "").strip(), "function": found.name}


_LIBRARIES = tuple(str(Path(p).resolve()) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
_COURSE = Path(__file__).resolve().parents[2]
_NOT_LEARNER = (_COURSE / "autograder", _COURSE / "transformer_ref")


def _is_learner_file(filename: str) -> bool:
    if filename.startswith("<") and not filename.startswith(("<cell ", "<ipython-input")):
        return False
    path = Path(filename).resolve()
    if str(path).startswith(_LIBRARIES) or "site-packages" in path.parts:
        return False
    tutorial_style = _COURSE / "autograder" / "tutorial_style"
    return (path.is_relative_to(tutorial_style)
            or not any(path.is_relative_to(p) for p in _NOT_LEARNER))


def describe_location(error: BaseException) -> str:
    """``"(in `softmax`, line 3: `e = np.exp(x - x.max(axis=axis))`)"``, or ``""``."""
    where = learner_location(error)
    if not where:
        return ""
    text = where.get("text") or ""
    shown = f": `{text if len(text) <= 120 else text[:117] + '...'}`" if text else ""
    function = where.get("function") or "your code"
    name = "your code" if function == "<module>" else f"`{function}`"
    return f"(in {name}, line {where.get('line')}{shown})"


class LearnerError(CheckFailure):
    """The learner's code raised ``error`` during the call ``where``; the message gives the
    error, the learner's own failing line and, for a known mistake, a hint."""

    def __init__(self, where: str, error: BaseException, hint: str | None = None) -> None:
        self.where, self.error = where, error
        if hint is None:
            hint = next((h.message for h in COMMON_ERROR_HINTS if h.matches(error)), None)
        self.hint = hint
        text = f"{where} raised {type(error).__name__}: {str(error).strip() or '(no message)'}"
        location = describe_location(error)
        if location:
            text += f" {location}"
        if hint:
            text += f" Hint: {hint}"
        super().__init__(text)


@contextmanager
def error_hints(hints: Iterable[ErrorHint]) -> Iterator[None]:
    """Within the block, a :class:`LearnerError` that one of ``hints`` explains carries that
    hint instead of a generic one (list the most specific hints first)."""
    hints = list(hints)
    try:
        yield
    except LearnerError as exc:
        for hint in hints:
            if hint.matches(exc.error):
                raise LearnerError(exc.where, exc.error, hint.message) from exc.error
        raise


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the learner's ``fn``; its exceptions and in-place edits become :class:`CheckFailure`.

    Raises:
        LearnerError: ``fn`` raised (a :class:`CheckFailure`; the message gives the call, the
            exception's type and text, the learner's failing line and a hint for known
            mistakes; ``__cause__`` is the exception).
        CheckFailure: ``fn`` is still the stub, or modified one of its array arguments in place.
    """
    where = describe_call(fn, args, kwargs)
    before = copy.deepcopy((args, kwargs))
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError as exc:
        raise CheckFailure(
            f"{where} raised NotImplementedError: the exercise is not done yet. "
            "Replace the `raise NotImplementedError()` line with your implementation."
        ) from exc
    except (Exception, SystemExit) as exc:
        raise LearnerError(where, exc) from exc
    for i, (old, new) in enumerate(zip(before[0], args, strict=True)):
        changed = _first_change(old, new, f"argument {i + 1}")
        if changed:
            fail(f"{where} modified {changed} in place. Leave the inputs unchanged: "
                 "work on new arrays (for example `x = x - m` instead of `x -= m`).")
    for key, new in kwargs.items():
        changed = _first_change(before[1][key], new, f"argument {key!r}")
        if changed:
            fail(f"{where} modified {changed} in place. Leave the inputs unchanged.")
    return result


def shows(text: str, value: Any) -> bool:
    """Whether ``text`` shows ``value``: a number as a whole number (``3`` is not in ``13``
    nor in ``0.3``), anything else as a substring."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return re.search(rf"(?<![\d.]){int(value)}(?![\d]|\.\d)", text) is not None
    return str(value) in text


def expect_raises(
    fn: Callable[..., Any],
    errors: type[BaseException] | tuple[type[BaseException], ...],
    *args: Any,
    reason: str,
    mentions: Sequence[Any] = (),
    **kwargs: Any,
) -> BaseException:
    """Check that ``fn(*args, **kwargs)`` raises one of ``errors`` because of ``reason``.

    Args:
        errors: the accepted exception types; ``Exception`` accepts any error (the stub's
            NotImplementedError never counts).
        reason: the rule the arguments break, as the message tells it to the learner.
        mentions: values the exception's message must show (e.g. the offending numbers),
            compared with :func:`shows`.

    Returns:
        The exception raised.
    """
    errors = errors if isinstance(errors, tuple) else (errors,)
    # Exception itself: any error will do; the advice then suggests a ValueError.
    names = "an error" if Exception in errors else " or ".join(e.__name__ for e in errors)
    advised = "ValueError" if Exception in errors else errors[0].__name__
    where = describe_call(fn, args, kwargs)
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError as exc:
        raise CheckFailure(f"{where} raised NotImplementedError: the exercise is not done yet.") \
            from exc
    except errors as exc:
        missing = [str(m) for m in mentions if not shows(str(exc), m)]
        if missing:
            fail(f"{where} raised {type(exc).__name__}: {exc!s} ({reason}), but the message "
                 f"should show {' and '.join(str(m) for m in mentions)} so that whoever meets "
                 f"it sees what is wrong: for example `raise {type(exc).__name__}(f\"... "
                 f"{{...}} ...\")` with the values in the f-string.")
        return exc
    except (Exception, SystemExit) as exc:
        location = describe_location(exc)
        fail(f"{where} should raise {names} ({reason}), but raised "
             f"{type(exc).__name__}: {exc}{' ' + location if location else ''}. Check the "
             f"arguments first and `raise {advised}(...)` with a message that says why.")
    fail(f"{where} should raise {names} ({reason}), but it returned {describe(result)}. "
         f"Check the input and `raise {advised}(...)` with a message that says why.")


# ----------------------------------------------------------------------------- results


def expect_tuple(got: Any, names: Sequence[str], what: str) -> tuple[Any, ...]:
    """Check that ``got`` is a tuple with one item per name, e.g. ``("out", "weights")``."""
    wanted = "(" + ", ".join(names) + ")"
    if not isinstance(got, (tuple, list)):
        fail(f"{what}: expected a tuple {wanted}, got {describe(got)}. "
             f"Return all of them: `return {', '.join(names)}`.")
    if len(got) != len(names):
        fail(f"{what}: expected a tuple {wanted} of {len(names)} items, got {len(got)} items.")
    return tuple(got)


@dataclass(frozen=True)
class Hint:
    """A sentence added to a failure message when the learner's output shows a known bug.

    Give either ``buggy`` (what the buggy formula returns on the same inputs; the hint fires
    when the learner's array has its shape and matches it within ``tolerance``, by default
    the float32 one) or ``predicate`` (called with the learner's array; the hint fires when it
    returns True).
    """

    message: str
    buggy: Any = None
    predicate: Callable[[np.ndarray], bool] | None = None
    tolerance: tuple[float, float] = FLOAT32_TOLERANCE

    def matches(self, got: Any) -> bool:
        if not isinstance(got, np.ndarray):
            return False
        try:
            if self.predicate is not None:
                return bool(self.predicate(got))
            buggy = np.asarray(self.buggy)
            if buggy.shape != got.shape:
                return False
            if buggy.dtype == bool or got.dtype == bool:
                return bool(np.array_equal(got.astype(bool), buggy.astype(bool)))
            rtol, atol = self.tolerance
            return bool(np.allclose(got, buggy, rtol=rtol, atol=atol, equal_nan=True))
        except Exception:  # a hint must never break the failure message it decorates
            return False


def add_hint(message: str, got: Any, hints: Iterable[Hint]) -> str:
    """``message`` plus the sentence of the first hint that recognises ``got`` (if any).

    Only one hint is added, so list the most specific hints first.
    """
    for hint in hints:
        if hint.matches(got):
            return f"{message} Hint: {hint.message}"
    return message


def tolerance_for(dtype: np.dtype) -> tuple[float, float]:
    """``(rtol, atol)`` of the course for results of ``dtype`` (float32 or looser: float32's)."""
    if np.issubdtype(dtype, np.floating) and np.finfo(dtype).bits <= 32:
        return FLOAT32_TOLERANCE
    return FLOAT64_TOLERANCE


def expect_array(
    got: Any,
    what: str,
    *,
    shape: tuple[int, ...] | None = None,
    dtype: str | np.dtype | type | None = "float",
) -> np.ndarray:
    """Check the type, shape, dtype and finiteness of a learner's result and return it.

    Args:
        got: the learner's value.
        what: how the message names it, e.g. ``"out"`` or ``"softmax(x, axis=0)"``.
        shape: the required shape, or None for any shape.
        dtype: ``"float"`` (any floating dtype, must be finite), ``"bool"``, a specific
            dtype (required exactly), or None (any dtype).
    """
    if not isinstance(got, np.ndarray):
        extra = ""
        if isinstance(got, (tuple, list)) and shape is not None:
            extra = " Return a single array here, not a tuple or list."
        fail(f"{what}: expected a NumPy array{_shape_words(shape)}, got {describe(got)}.{extra}")
    if shape is not None and got.shape != tuple(shape):
        message = f"{what}: expected shape {tuple(shape)}, got {got.shape}."
        if sorted(got.shape) == sorted(shape):
            message += " The axes look permuted: check your transposes and axis arguments."
        fail(message)
    if dtype == "float":
        if not np.issubdtype(got.dtype, np.floating):
            fail(f"{what}: expected a floating-point array, got dtype {got.dtype}.")
    elif dtype == "bool":
        if got.dtype != np.bool_:
            fail(f"{what}: expected a boolean array, got dtype {got.dtype}. "
                 "Build it from comparisons, or convert with `.astype(bool)`.")
    elif dtype is not None and got.dtype != np.dtype(dtype):
        fail(f"{what}: expected dtype {np.dtype(dtype)}, got {got.dtype}. "
             f"Convert with `.astype(np.{np.dtype(dtype)})`.")
    if np.issubdtype(got.dtype, np.floating) or np.issubdtype(got.dtype, np.complexfloating):
        bad = ~np.isfinite(got)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            kind = "NaN" if np.isnan(got[index]) else "infinite"
            fail(f"{what}: contains {int(bad.sum())} NaN or infinite value(s), the first "
                 f"({kind}) at index {index}.")
    return got


def _shape_words(shape: tuple[int, ...] | None) -> str:
    return "" if shape is None else f" of shape {tuple(shape)}"


# Why a result should keep the inputs' float dtype, and why a mask is boolean (for the messages).
KEEP_DTYPE = ("keeping the inputs' float dtype is good practice, not graded: float32 takes half "
              "the memory of float64 and is the dtype models train in")
BOOL_MASK_RULE = (
    "the masks the course builds are boolean: functions that take a mask also accept 0/1 "
    "numbers, but ~mask of 0/1 integers gives -1 and -2, not the opposite mask"
)
# How float32 arrays become float64 under NumPy 2's promotion rules (NEP 50).
FLOAT32_ADVICE = (
    "Your function was given float32 and returned float64, so a float64 value entered its "
    "computation: a float64 array (np.zeros, np.ones and np.arange make float64 unless told), "
    "an .astype(np.float64), or under NumPy 2 a NumPy float64 scalar (np.float64(...), "
    "np.sqrt or np.exp of a Python number), while a Python float does not (math.sqrt(n), "
    "n ** 0.5). Or convert at the end: .astype(x.dtype)."
)


def dtype_note(got: np.dtype, wanted: np.dtype, what: str, rule: str | None = None,
               advice: str | None = None) -> str:
    """The note for a result whose values are right in another float dtype than ``wanted``."""
    if advice is None:
        advice = (FLOAT32_ADVICE if wanted == np.float32 and got == np.float64
                  else f"Convert at the end with .astype(np.{wanted}).")
    return (f"{what} came back {got} where the exercise asks for {wanted}; the values are "
            f"right, so this costs no points ({rule or KEEP_DTYPE}). {advice}")


def compare(
    got: Any,
    expected: Any,
    what: str,
    *,
    hints: Iterable[Hint] = (),
    dtype: str | np.dtype | type | None = None,
    dtype_rule: str | None = None,
    dtype_advice: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> np.ndarray:
    """Check that the learner's ``got`` equals ``expected`` (type, shape, dtype, values).

    Floating results must match within the course tolerances of ``expected``'s dtype (or the
    given ``rtol``/``atol``); boolean and integer results must match exactly, in their kind.
    On failure the message names the first problem, and the first of ``hints`` that
    recognises ``got`` adds its sentence (so list the most specific hints first). A float
    result whose values are right in another float dtype than the one asked for passes with a
    :func:`note` (the float dtype alone costs no points); a 0/1 array of numbers where a
    boolean one is expected fails, and is compared as booleans first, so that the message can
    say whether the values are right.

    Args:
        dtype: passed to :func:`expect_array`; by default ``"bool"`` for boolean ``expected``,
            ``"float"`` for floating ``expected``, otherwise ``expected``'s dtype. A floating
            dtype is the one the note recommends.
        dtype_rule: why that dtype, for the message or the note (default: :data:`KEEP_DTYPE`,
            or :data:`BOOL_MASK_RULE` for boolean results).
        dtype_advice: how to get the float dtype, for the note (default: :func:`dtype_note`'s).

    Returns:
        ``got`` as validated.
    """
    expected = np.asarray(expected)
    dtype = _required_dtype(expected) if dtype is None else dtype
    exact_float = not isinstance(dtype, str) and np.issubdtype(np.dtype(dtype), np.floating)
    hints = list(hints)
    if (dtype == "bool" and _zeros_and_ones(got, expected.shape)
            and np.array_equal(got.astype(bool), expected)):
        fail(f"{what}: the 0s and 1s are in the right places, but the result has dtype "
             f"{got.dtype} and {dtype_rule or BOOL_MASK_RULE}. Build the mask from a "
             f"comparison, or convert it with .astype(bool).")
    try:
        got = expect_array(got, what, shape=expected.shape,
                           dtype="float" if exact_float else dtype)
        if not np.issubdtype(expected.dtype, np.floating):
            _compare_exact(got, expected, what)
        else:
            default_rtol, default_atol = tolerance_for(expected.dtype)
            _compare_close(got, expected, what,
                           default_rtol if rtol is None else rtol,
                           default_atol if atol is None else atol)
    except CheckFailure as exc:
        raise CheckFailure(add_hint(str(exc), got, hints)) from None
    if exact_float and got.dtype != np.dtype(dtype):
        note(("float dtype", got.dtype.str, np.dtype(dtype).str),
             dtype_note(got.dtype, np.dtype(dtype), what, dtype_rule, dtype_advice))
    return got


def _required_dtype(expected: np.ndarray) -> str | np.dtype:
    """What :func:`compare` requires of a result by default: ``"bool"`` for boolean
    ``expected``, ``"float"`` (any float dtype) for floating ``expected``, else its dtype."""
    if expected.dtype == np.bool_:
        return "bool"
    if np.issubdtype(expected.dtype, np.floating):
        return "float"
    return expected.dtype


def _zeros_and_ones(got: Any, shape: tuple[int, ...]) -> bool:
    """Whether ``got`` is a non-boolean numeric array of ``shape`` holding only 0 and 1."""
    return (isinstance(got, np.ndarray) and got.shape == shape and got.dtype != np.bool_
            and np.issubdtype(got.dtype, np.number) and bool(np.isin(got, (0, 1)).all()))


def _compare_exact(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    wrong = got != expected
    if wrong.any():
        index = tuple(int(i) for i in np.argwhere(wrong)[0])
        fail(f"{what}: {int(wrong.sum())} of {wrong.size} entries are wrong; the first at index "
             f"{index}: expected {expected[index].item()!r}, got {got[index].item()!r}.")


def _compare_close(
    got: np.ndarray, expected: np.ndarray, what: str, rtol: float, atol: float
) -> None:
    error = np.abs(got.astype(np.float64) - expected.astype(np.float64))
    allowed = atol + rtol * np.abs(expected.astype(np.float64))
    wrong = error > allowed
    if wrong.any():
        index = tuple(int(i) for i in np.unravel_index(np.argmax(error), error.shape))
        fail(f"{what}: {int(wrong.sum())} of {wrong.size} values differ from the expected "
             f"result (rtol={rtol:g}, atol={atol:g}). The largest error is {error[index]:.3g} "
             f"at index {index}: expected {expected[index]:.6g}, got {got[index]:.6g}.")


# ----------------------------------------------------------------------------- inputs


def random_batch_shape(
    rng: np.random.Generator, min_dims: int = 1, max_dims: int = 2, max_size: int = 3
) -> tuple[int, ...]:
    """A random tuple of ``min_dims`` .. ``max_dims`` leading (batch) sizes, each in
    1 .. ``max_size``."""
    dims = int(rng.integers(min_dims, max_dims + 1))
    return tuple(int(n) for n in rng.integers(1, max_size + 1, size=dims))


def random_mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A random boolean mask (True = may attend) in which every row along the last axis has
    at least one True and, when the row has two or more entries, at least one False."""
    mask = rng.random(shape) < 0.6
    rows = mask.reshape(-1, shape[-1])
    columns = rng.integers(0, shape[-1], size=(rows.shape[0], 2))
    index = np.arange(rows.shape[0])
    if shape[-1] >= 2:
        # Two distinct columns per row: one forced open, one forced closed.
        second = (columns[:, 0] + 1 + columns[:, 1] % (shape[-1] - 1)) % shape[-1]
        rows[index, second] = False
    rows[index, columns[:, 0]] = True
    return rows.reshape(shape)
