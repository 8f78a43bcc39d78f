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
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

SECRET_ENV = "AUTOGRADER_SECRET"
# Used when AUTOGRADER_SECRET is unset, so development and tests work out of the box. Anyone can
# read it, so hidden inputs are only secret when the grading machine sets its own value.
DEVELOPMENT_SECRET = "build-the-transformer-development-secret"

FLOAT64_TOLERANCE = (1e-4, 1e-5)
FLOAT32_TOLERANCE = (1e-3, 1e-4)


class CheckFailure(Exception):  # noqa: N818 - a failed check, not an error of the grader
    """A check did not pass; ``str(exc)`` is the message shown to the learner."""


def fail(message: str) -> NoReturn:
    """Stop the check with ``message`` for the learner."""
    raise CheckFailure(message)


def seed_for(exercise_id: str, hidden: bool) -> int:
    """The 64-bit seed of an exercise's random inputs.

    Visible mode: fixed per exercise, so every learner sees the same inputs and messages.
    Hidden mode: derived from ``sha256(AUTOGRADER_SECRET + exercise_id)``; the development
    default :data:`DEVELOPMENT_SECRET` applies when the variable is unset or empty.
    """
    if hidden:
        secret = os.environ.get(SECRET_ENV) or DEVELOPMENT_SECRET
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


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the learner's ``fn``; its exceptions and in-place edits become :class:`CheckFailure`.

    Raises:
        CheckFailure: ``fn`` raised (message gives the call, exception type and text), is still
            the stub, or modified one of its array arguments in place.
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
        text = str(exc) or "(no message)"
        raise CheckFailure(f"{where} raised {type(exc).__name__}: {text}") from exc
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


def expect_raises(
    fn: Callable[..., Any],
    errors: type[BaseException] | tuple[type[BaseException], ...],
    *args: Any,
    reason: str,
    **kwargs: Any,
) -> None:
    """Check that ``fn(*args, **kwargs)`` raises one of ``errors`` because of ``reason``."""
    errors = errors if isinstance(errors, tuple) else (errors,)
    names = " or ".join(e.__name__ for e in errors)
    where = describe_call(fn, args, kwargs)
    try:
        result = fn(*args, **kwargs)
    except errors:
        return
    except NotImplementedError as exc:
        raise CheckFailure(f"{where} raised NotImplementedError: the exercise is not done yet.") \
            from exc
    except (Exception, SystemExit) as exc:
        fail(f"{where} should raise {names} ({reason}), but raised "
             f"{type(exc).__name__}: {exc}")
    fail(f"{where} should raise {names} ({reason}), but it returned {describe(result)}. "
         f"Check the input and `raise {errors[0].__name__}(...)` with a message that says why.")


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
    when the learner's array has its shape and matches it) or ``predicate`` (called with the
    learner's array; the hint fires when it returns True).
    """

    message: str
    buggy: Any = None
    predicate: Callable[[np.ndarray], bool] | None = None

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
            rtol, atol = FLOAT32_TOLERANCE
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


def compare(
    got: Any,
    expected: Any,
    what: str,
    *,
    hints: Iterable[Hint] = (),
    dtype: str | np.dtype | type | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> np.ndarray:
    """Check that the learner's ``got`` equals ``expected`` (type, shape, dtype, values).

    Floating results must match within the course tolerances of ``expected``'s dtype (or the
    given ``rtol``/``atol``); boolean and integer results must match exactly. On failure the
    message names the first problem, and the first of ``hints`` that recognises ``got`` adds
    its sentence (so list the most specific hints first).

    Args:
        dtype: passed to :func:`expect_array`; by default ``"bool"`` for boolean ``expected``,
            ``"float"`` for floating ``expected``, otherwise ``expected``'s dtype.

    Returns:
        ``got`` as validated.
    """
    expected = np.asarray(expected)
    if dtype is None:
        if expected.dtype == np.bool_:
            dtype = "bool"
        elif np.issubdtype(expected.dtype, np.floating):
            dtype = "float"
        else:
            dtype = expected.dtype
    hints = list(hints)
    try:
        got = expect_array(got, what, shape=expected.shape, dtype=dtype)
        if not np.issubdtype(expected.dtype, np.floating):
            _compare_exact(got, expected, what)
        else:
            default_rtol, default_atol = tolerance_for(expected.dtype)
            _compare_close(got, expected, what,
                           default_rtol if rtol is None else rtol,
                           default_atol if atol is None else atol)
    except CheckFailure as exc:
        raise CheckFailure(add_hint(str(exc), got, hints)) from None
    return got


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
