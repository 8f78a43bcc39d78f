"""Sealed in every form: in no learner view the course allows does any function, method or class
compute the answer of an exercise that is still open, whatever a learner wraps around it.

The probe calls every function and class of the view's computing code (``transformer_ref`` and
the models the checks hand over; the rest of the view's ``autograder`` is the check client)
through the visible checks of each open exercise, with the adapters a learner would write: NumPy
<-> torch, the first three arguments in any order, a boolean mask made additive, the result
reshaped to the documented shape, and a class built with the exercise's sizes (a PyTorch module
loaded with the exercise's weights) and called through each of its methods. Candidates run as in
the view: the modules it lacks (stubs included) cannot be imported, and nothing else lends what
they hold. A candidate that cannot take the exercise's arguments, or that fails the checks'
first call, is not run through the whole checks: that keeps the probe within seconds a chapter.

Which states: for each chapter C, the largest view in which C is open (every other chapter
closed, every chapter released that the course lets out then). A view with more chapters open
holds no more: fewer chapters are released, and more modules are withheld. So these cover every
class state the course allows, for every open exercise.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import importlib.abc
import inspect
import itertools
import re
import signal
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from autograder.course import CHAPTERS, ROOT, Course
from autograder.exercises.reach import closure
from autograder.exercises.registry import Exercise, all_exercises, grade_function
from autograder.steps.view import ChapterStates, View, plan_view, release_problems

COURSE = Course.of(ROOT)
COURSE_PACKAGES = ("transformer_ref", "autograder")
CALL_LIMIT_S = 2.0  # a candidate that trains a model or waits is no answer


def largest_state(chapter: str) -> ChapterStates:
    """Every chapter but ``chapter`` closed, and every chapter released that may be then."""
    closed = frozenset(CHAPTERS) - {chapter}
    released = frozenset(c for c in CHAPTERS if not release_problems(
        COURSE, c, ChapterStates(frozenset({c}), closed)))
    return ChapterStates(released, closed)


def _home(value: Any) -> str | None:
    if isinstance(value, types.ModuleType):
        return value.__name__
    if isinstance(value, (type, types.FunctionType)):
        return value.__module__
    return None


class Seal(importlib.abc.MetaPathFinder):
    """Runs code as in ``view`` (``with seal:``): the course modules outside it are neither
    loaded nor loadable, and no module lends anything of theirs (a package's submodule, a
    gathered name), as in a learner's kernel."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.depth = 0  # calls within calls (an adapter's) seal once
        self.listed_at = -1  # len(sys.modules) when the course's modules were listed
        self.loaded: list[str] = []
        self.watched: list[tuple[types.ModuleType, str]] = []

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in COURSE_PACKAGES and "." in name \
                and name not in self.view.modules:
            raise ImportError(f"{name} is not in the learner's view")

    def _list(self) -> None:
        """The loaded course modules, and their attributes that may hold another course
        module's code: those that do now, and the names a gathering module lends (it keeps
        each once asked). Listed again only when modules were loaded since."""
        if len(sys.modules) == self.listed_at:
            return
        self.listed_at = len(sys.modules)
        self.loaded = [n for n in sys.modules if n.split(".")[0] in COURSE_PACKAGES]
        held = [sys.modules[n] for n in self.loaded
                if "." not in n or n in self.view.modules]
        watched = [(m, name) for m in held for name, value in vars(m).items()
                   if (_home(value) or "").split(".")[0] in COURSE_PACKAGES]
        watched += [(m, name) for m in held if "__getattr__" in vars(m)
                    for name in getattr(m, "__all__", ())]
        self.watched = list(dict.fromkeys(watched))

    def __enter__(self) -> None:
        self.depth += 1
        if self.depth > 1:
            return
        self._list()
        outside = [n for n in self.loaded if "." in n and n not in self.view.modules]
        self.removed = {n: sys.modules.pop(n) for n in outside if n in sys.modules}
        self.lent = [(m, name, vars(m)[name]) for m, name in self.watched
                     if _home(vars(m).get(name)) in self.removed]
        for module, name, _ in self.lent:
            delattr(module, name)
        sys.meta_path.insert(0, self)

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth:
            return
        sys.meta_path.remove(self)
        for module, name, value in self.lent:
            setattr(module, name, value)
        sys.modules.update(self.removed)


def _timeout(signum: int, frame: Any) -> None:
    raise TimeoutError("the candidate ran too long")


def computing_modules() -> tuple[str, ...]:
    """Where the view keeps code that computes: ``transformer_ref``, and the models the checks
    hand to decoding exercises. (The rest of its ``autograder`` is the check client, whose
    state in this process, a registry full of checks and references, a view does not hold.)"""
    builders = {b.partition(":")[0] for e in all_exercises() for b in e.builders}
    return ("transformer_ref.", *sorted(b for b in builders if b.startswith("autograder.")))


def candidates(view: View) -> list[Any]:
    """The functions and classes of the view's computing modules that load there (nothing they
    import at load time is missing), each once, where it is defined."""
    found = []
    for name in sorted(view.modules):
        if not name.startswith(computing_modules()) or not closure(
                [name], at_import=True) <= view.modules:
            continue
        module = importlib.import_module(name)
        found += [value for attribute, value in vars(module).items()
                  if isinstance(value, (type, types.FunctionType))
                  and value.__module__ == name and not attribute.startswith("__")]
    return found


# ----------------------------------------------------------------------------- adapters


def to_torch(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))
    if isinstance(value, dict):
        return {k: to_torch(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_torch(v) for v in value)
    return value


def to_numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    if isinstance(value, (list, tuple)):
        return tuple(to_numpy(v) for v in value)
    return value


def like(got: Any, expected: Any) -> Any:
    """``got`` reshaped as ``expected`` where it holds as many numbers (a batch flattened or
    an axis of size 1 left over), as a learner who read the docstring would."""
    if isinstance(expected, tuple) and isinstance(got, tuple) and len(got) >= len(expected):
        return tuple(like(g, e) for g, e in zip(got, expected, strict=False))
    if isinstance(expected, np.ndarray) and isinstance(got, np.ndarray) \
            and got.size == expected.size and got.shape != expected.shape:
        return got.reshape(expected.shape)
    return got


def as_mask(value: Any, additive: np.dtype | None) -> Any:
    """A boolean or 0/1 mask as boolean (True = may attend), or additive (0 or -1e9) in the
    ``additive`` dtype."""
    if not isinstance(value, np.ndarray):
        return value
    allowed = value.astype(bool)
    return allowed if additive is None else np.where(allowed, 0.0, -1e9).astype(additive)


@dataclasses.dataclass(frozen=True)
class Adapter:
    """How a learner could call a candidate in place of the exercise's function."""

    torch: bool = False
    order: tuple[int, ...] = ()
    additive: bool = False

    def wrap(self, exercise: Exercise, candidate: Any, seal: Seal) -> Callable[..., Any]:
        reference = exercise.load_reference()
        signature = inspect.signature(reference)

        def adapted(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            dtype = next((v.dtype for v in bound.arguments.values()
                          if isinstance(v, np.ndarray) and v.dtype.kind == "f"), np.float64)
            values = [as_mask(v, dtype if self.additive else None) if n == "mask" else v
                      for n, v in bound.arguments.items()]
            values[:len(self.order)] = [values[i] for i in self.order]
            if self.torch:
                values = [to_torch(v) for v in values]
            got = to_numpy(limited(seal, candidate, *values))
            return like(got, reference(*args, **kwargs))

        return adapted


def limited(seal: Seal, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` as in ``seal``'s view, stopped after :data:`CALL_LIMIT_S`
    (within another such call, that call's limit holds)."""
    if seal.depth:
        return fn(*args, **kwargs)
    previous = signal.signal(signal.SIGALRM, _timeout)
    signal.setitimer(signal.ITIMER_REAL, CALL_LIMIT_S)
    try:
        with seal:
            return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# Names under which the checks hand weights, and under which constructors take sizes.
WEIGHTS = re.compile(r"^(W|b\d|gamma|beta|params$)")


def sizes(arguments: dict[str, Any], data: list[np.ndarray], weights: list[np.ndarray]
          ) -> dict[str, Any]:
    """Constructor arguments by name, from the exercise's arrays and numbers."""
    d_model = data[0].shape[-1]
    heads = next((v for v in arguments.values() if isinstance(v, int)), 1)
    d_ff = next((w.shape[1] for w in weights if w.ndim == 2 and w.shape[0] == d_model
                 and w.shape[1] != d_model), 4 * d_model)
    return {"d_model": d_model, "size": d_model, "features": d_model, "h": heads,
            "heads": heads, "num_heads": heads, "n_heads": heads, "d_ff": d_ff, "dropout": 0.0}


def build(cls: type, known: dict[str, Any], weights: list[np.ndarray], dtype: torch.dtype
          ) -> Any:
    """``cls`` built with ``known`` sizes; a PyTorch module in ``dtype``, its parameters loaded
    in order with ``weights`` (a matrix ``W`` as the ``x @ W`` of ``nn.Linear``: ``W.T``; a
    parameter left without one is a bias, 0, or a norm's gain, 1).

    Raises:
        TypeError or ValueError: the class needs another argument, or a weight does not fit.
    """
    needed = {n: known[n] for n, p in inspect.signature(cls).parameters.items() if n in known}
    module = cls(**needed)
    if not isinstance(module, nn.Module):
        return module
    module = module.to(dtype).eval()
    queue = [torch.from_numpy(np.asarray(w)) for w in weights]
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            weight = queue[0].T if queue and queue[0].ndim == 2 else (queue[0] if queue else None)
            if weight is not None and weight.shape == parameter.shape:
                parameter.copy_(weight)
                queue.pop(0)
            elif parameter.ndim == 1:
                parameter.fill_(1.0 if name.endswith("weight") else 0.0)
            else:
                raise ValueError(f"no weight fits {name}")
    for layer in module.modules():
        if hasattr(layer, "store_attention"):
            layer.store_attention = True
    return module


@dataclasses.dataclass(frozen=True)
class Built:
    """A class built from the exercise's sizes (and weights, for a PyTorch module), called
    through ``method`` on the exercise's inputs (leading axes flattened into one batch axis; a mask
    bool, over every head; missing inputs repeat the last: self-attention)."""

    method: str

    def wrap(self, exercise: Exercise, candidate: Any, seal: Seal) -> Callable[..., Any]:
        reference = exercise.load_reference()
        signature = inspect.signature(reference)

        def adapted(*args: Any, **kwargs: Any) -> Any:
            arguments = signature.bind(*args, **kwargs).arguments
            weights = [w for n, v in arguments.items() if WEIGHTS.match(n)
                       for w in (v.values() if isinstance(v, dict) else [v])]
            data = [v for n, v in arguments.items() if isinstance(v, np.ndarray)
                    and n != "mask" and not WEIGHTS.match(n)]
            batch = data[0].shape[:-2]
            module = limited(seal, build, candidate, sizes(arguments, data, weights), weights,
                             to_torch(data[0]).dtype)
            method = getattr(module, self.method)
            inputs = [to_torch(x.reshape((-1, *x.shape[-2:]))) for x in data]
            wanted = [p for p in inspect.signature(method).parameters.values()
                      if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
            inputs += inputs[-1:] * (len(wanted) - len(inputs))
            extra = {}
            mask = arguments.get("mask")
            if mask is not None and "mask" in inspect.signature(method).parameters:
                mask = np.broadcast_to(mask.astype(bool), batch + mask.shape[-2:])
                extra["mask"] = to_torch(mask.reshape((-1, *mask.shape[-2:])))[:, None]
            out = limited(seal, method, *inputs, **extra)
            stored = [m.attn_weights for m in module.modules()
                      if getattr(m, "attn_weights", None) is not None
                      ] if isinstance(module, nn.Module) else []
            expected = reference(*args, **kwargs)
            if isinstance(expected, tuple) and stored:  # (out, weights)
                out = (out, stored[-1])
            return like(to_numpy(out), expected)

        return adapted


def methods(cls: type) -> list[str]:
    """The methods a learner could call on a built ``cls``: its own and its bases' in the
    course, and a module's ``forward``."""
    own = {n for base in cls.__mro__ if base.__module__.startswith(computing_modules())
           for n, v in vars(base).items() if isinstance(v, types.FunctionType)
           and not n.startswith("__")}
    return sorted(own | ({"forward"} if issubclass(cls, nn.Module) else set()))


# ----------------------------------------------------------------------------- the probe


def accepts(candidate: Any, count: int) -> bool:
    """Whether ``candidate`` can be called with ``count`` positional arguments, none of them a
    file's path (a function that reads a file answers nothing from arrays and numbers, and
    given a number it would read, or close, a file descriptor of this process)."""
    try:
        bound = inspect.signature(candidate).bind(*[None] * count)
    except (TypeError, ValueError):
        return False
    parameters = bound.signature.parameters
    return not any("Path" in str(parameters[name].annotation) for name in bound.arguments)


def probes(exercise: Exercise, seal: Seal, found: list[Any]
           ) -> Iterator[tuple[str, Callable[..., Any]]]:
    """``(what, function)``: each candidate, through each adapter that can take the exercise's
    arguments. A PyTorch exercise's candidates are handed over as they are."""
    reference = exercise.load_reference()
    count = sum(1 for p in inspect.signature(reference).parameters.values()
                if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD)
    names = inspect.signature(reference).parameters
    orders = itertools.permutations(range(min(count, 3)))
    adapters = [Adapter(t, o, a) for o in orders for t in (False, True)
                for a in (False, "mask" in names)]
    for candidate in found:
        what = f"{candidate.__module__}.{candidate.__qualname__}"
        if not exercise.reference.startswith("transformer_ref.numpy."):
            if isinstance(reference, type) == isinstance(candidate, type) \
                    and accepts(candidate, count):
                yield what, candidate
        elif isinstance(candidate, type):
            for method in methods(candidate):
                yield f"{what}.{method}", Built(method).wrap(exercise, candidate, seal)
        elif not isinstance(candidate, type) and accepts(candidate, count):
            for adapter in dict.fromkeys(adapters):
                yield f"{what} {adapter}", adapter.wrap(exercise, candidate, seal)


@functools.cache
def first_call(exercise_id: str) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The arguments of the visible checks' first call, unless that call expects an error."""
    calls = []

    def record(*args: Any, **kwargs: Any) -> None:
        expecting = any(f.function == "expect_raises" for f in inspect.stack())
        calls.append((copy.deepcopy(args), copy.deepcopy(kwargs), expecting))
        raise LookupError("recorded")

    grade_function(exercise_id, record)
    return calls[0][:2] if calls and not calls[0][2] else None


def passes(exercise: Exercise, fn: Callable[..., Any], seal: Seal) -> bool:
    """Whether ``fn`` passes the exercise's visible checks. One that raises on their first call
    fails them: that call alone, which costs less than the checks' own preparations, says so."""
    first = first_call(exercise.id)
    if first is not None:
        args, kwargs = copy.deepcopy(first)
        try:
            limited(seal, fn, *args, **kwargs)
        except Exception:  # any error of the candidate fails the checks
            return False
    return grade_function(exercise.id, fn).passed


@functools.cache
def largest_view(chapter: str) -> View:
    """The view of :func:`largest_state`, with the course's own registry."""
    return plan_view(COURSE, largest_state(chapter))


def answers(view: View, exercises: list[Exercise]) -> list[str]:
    """What in ``view`` passes the visible checks of one of ``exercises``."""
    found, seal = candidates(view), Seal(view)
    return [f"{exercise.id}: {what}" for exercise in exercises
            for what, fn in probes(exercise, seal, found) if passes(exercise, fn, seal)]


def _chapter(chapter: str) -> list[Exercise]:
    return [e for e in all_exercises() if e.chapter == chapter]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_view_the_course_allows_answers_an_open_exercise(chapter: str):
    assert answers(largest_view(chapter), _chapter(chapter)) == []


def test_a_candidate_reaches_nothing_the_view_lacks():
    """The probe's calls run as in the view: a module it lacks does not import, and a gathering
    module lends none of its names, even those this process has loaded."""
    import transformer_ref.np_attention as gathering

    seal = Seal(plan_view(COURSE, largest_state("ch02_attention")))
    assert gathering.softmax  # loaded here, and lent from now on outside the view
    loaded = dict(sys.modules)
    with pytest.raises(ImportError):
        limited(seal, importlib.import_module, "transformer_ref.numpy.scaled_attention")
    with pytest.raises(ImportError):  # also from a call within a call, as adapters make
        limited(seal, limited, seal, getattr, gathering, "softmax")
    # And all is back afterwards.
    assert all(sys.modules.get(name) is module for name, module in loaded.items())
    assert gathering.softmax(np.zeros(2)).sum() == 1


def test_the_probe_finds_the_answers_of_a_closed_chapter_kept_open():
    """The planted answer: chapter 2 closed (its reference in the view), its exercises probed as
    if still open: each is found."""
    state = largest_state("ch02_attention")
    state = ChapterStates(state.released, state.closed | {"ch02_attention"})
    found = answers(plan_view(COURSE, state), _chapter("ch02_attention"))
    assert {f.partition(":")[0] for f in found} == {e.id for e in _chapter("ch02_attention")}


@pytest.mark.parametrize("chapter, expected", [
    ("ch02_attention", {"ch02.causal_mask", "ch02.scaled_dot_product_attention"}),
    ("ch04_multi_head_attention", {"ch04.multi_head_attention"}),
    ("ch06_encoder_block", {"ch06.encoder_block"}),
])
def test_the_probe_finds_answers_in_another_form(chapter: str, expected: set[str],
                                                  monkeypatch):
    """Without the registry's ``answered_by``, the largest view with ``chapter`` open holds its
    answers in PyTorch (attention, masks, modules loaded with the exercise's weights), as a
    class found on the class server: the probe finds them through its adapters."""
    import autograder.steps.view as view

    plain = [dataclasses.replace(e, answered_by=()) for e in all_exercises()]
    monkeypatch.setattr(view, "all_exercises", lambda: plain)
    found = answers(plan_view(COURSE, largest_state(chapter)), _chapter(chapter))
    assert {f.partition(":")[0] for f in found} == expected, found


def test_the_largest_views_hold_every_allowed_view():
    """Why the largest views suffice, on a seeded sample of allowed states: each view holds
    nothing that the largest view with one of its open chapters lacks."""
    rng = np.random.default_rng(32)
    for _ in range(3):
        closed = frozenset(c for c in CHAPTERS if rng.random() < 0.6)
        chapter = str(rng.choice(sorted(set(CHAPTERS) - closed)))
        released = frozenset(c for c in CHAPTERS if rng.random() < 0.7 and not release_problems(
            COURSE, c, ChapterStates(frozenset({c}), closed)))
        view = plan_view(COURSE, ChapterStates(released, closed))
        assert view.modules <= largest_view(chapter).modules, (released, closed, chapter)
