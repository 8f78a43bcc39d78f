"""The toolkit for checks of PyTorch exercises (chapters 7-12): modules, torch functions.

A PyTorch exercise asks for an ``nn.Module`` class with the constructor signature and the
parameter names of its reference in :mod:`transformer_ref.modules`. Its check builds both
modules with one configuration, copies the reference's weights into the learner's module, and
compares outputs and gradients in float64::

    from autograder.exercises.checking import CheckContext, Hint
    from autograder.exercises.registry import register
    from autograder.exercises.torch_checking import build_modules, compare_forward, random_tensor

    @register(
        "ch07.positionwise_feed_forward",
        title="Position-wise feed-forward network as a module",
        points=2, difficulty="easy", minutes=10,
        reference="transformer_ref.modules:PositionwiseFeedForward",
    )
    def check_positionwise_feed_forward(ctx: CheckContext, fn) -> None:
        rng = ctx.rng                                   # fixed seed visible, secret seed hidden
        d_model, d_ff = 2 * int(rng.integers(3, 9)), int(rng.integers(5, 17))
        dropout = float(rng.uniform(0.1, 0.3))          # eval mode: must have no effect
        pair = build_modules(ctx, fn, d_model, d_ff, dropout)   # reference + learner, float64
        x = random_tensor(rng, (2, 5, d_model))
        compare_forward(ctx, pair, (x,), hints=[Hint("no ReLU?", buggy=...)])

:func:`build_modules` instantiates ``ctx.reference`` with random weights drawn from ``ctx.rng``
and the learner's ``fn`` with the same arguments (a wrong signature fails with the expected
one), loads the reference's ``state_dict`` into the learner's module (a naming mismatch fails
with the missing and unexpected keys and the expected names; learner buffers that the reference
also holds, such as a persistent ``pe`` table, are allowed), and puts both in float64 eval mode.
:func:`compare_forward` runs both on the same inputs, compares the outputs, backpropagates one
random cotangent through both and compares the gradients of every floating input and every
parameter (the message names the one with the largest error). :func:`call_torch` calls any
learner callable with tensor arguments (errors become :class:`CheckFailure`, in-place changes
of the inputs are reported) and :func:`compare_tensors` compares a learner tensor with an
expected one, so plain torch functions are checked the same way. Property checks:
:func:`expect_buffer`, :func:`expect_deterministic`, :func:`check_causal` and
:func:`check_padding_invariant`. Training mode: :func:`training_output` (seeded, with chosen
sub-modules in eval mode), :func:`dropout_problem` and :func:`expect_dropout_probability`; the
course's rules for where dropout acts are in :mod:`autograder.exercises.dropout_rules`.

torch is imported inside the functions only: chapter modules may import this module at the
top, and ``import autograder`` (or grading a NumPy exercise) never loads torch.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from autograder.exercises.checking import (
    FLOAT64_TOLERANCE,
    CheckContext,
    CheckFailure,
    Hint,
    call,
    compare,
    describe,
    fail,
)
from autograder.exercises.layouts import (
    adapt_state,
    layout_mapping,
    learner_gradient,
    naming_advice,
)

if TYPE_CHECKING:
    from torch import Tensor, nn


def _torch() -> Any:
    import torch

    return torch


# ----------------------------------------------------------------------------- descriptions


def describe_tensor(value: Any) -> str:
    """``"<float64 tensor (2, 5, 16)>"`` for tensors, :func:`describe` for anything else."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"<{dtype} tensor {tuple(value.shape)}>"
    return describe(value)


class _Shown:
    """An argument that messages show by a short text instead of its (long) repr."""

    def __init__(self, value: Any, text: str) -> None:
        self.value = value
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def __deepcopy__(self, memo: dict) -> _Shown:
        return self  # tensors are compared by call_torch itself, not by call()


def _shown(value: Any) -> Any:
    torch = _torch()
    return _Shown(value, describe_tensor(value)) if isinstance(value, torch.Tensor) else value


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, _Shown) else value


def _name_of(fn: Any) -> str:
    if isinstance(fn, _torch().nn.Module):
        return f"{type(fn).__name__}.forward"
    return getattr(fn, "__name__", "your function")


# ----------------------------------------------------------------------------- calling


def call_torch(fn: Callable[..., Any], *args: Any, name: str | None = None, **kwargs: Any) -> Any:
    """Call the learner's ``fn`` (a function, a class or a module) with tensor arguments.

    Exceptions become :class:`CheckFailure` exactly as in
    :func:`autograder.exercises.checking.call`; tensors appear in the message as ``<float64
    tensor (2, 5, 16)>``. A tensor argument that ``fn`` changed in place also fails the check.

    Args:
        name: how the message names ``fn``; default ``"Class.forward"`` for a module, else
            ``fn.__name__``.
    """
    torch = _torch()

    def learner(*shown_args: Any, **shown_kwargs: Any) -> Any:
        return fn(*map(_unwrap, shown_args), **{k: _unwrap(v) for k, v in shown_kwargs.items()})

    learner.__name__ = name or _name_of(fn)
    tensors = [(f"argument {i + 1}", a) for i, a in enumerate(args)]
    tensors += [(f"argument {k!r}", v) for k, v in kwargs.items()]
    tensors = [(where, t) for where, t in tensors if isinstance(t, torch.Tensor)]
    before = [t.detach().clone() for _, t in tensors]
    result = call(learner, *map(_shown, args), **{k: _shown(v) for k, v in kwargs.items()})
    for (where, tensor), old in zip(tensors, before, strict=True):
        if tensor.shape != old.shape or not torch.equal(tensor.detach(), old):
            fail(f"{learner.__name__} modified {where} in place. Leave the inputs unchanged: "
                 "write `x = x + y` rather than `x += y` (or `x.add_(y)`).")
    return result


def expected_signature(reference: Any) -> str:
    """``"MultiHeadAttention(d_model: int, h: int, dropout: float = 0.0, fast: bool = True)"``."""
    name = getattr(reference, "__name__", "reference")
    try:
        signature = inspect.signature(reference, eval_str=True)
    except (NameError, TypeError, ValueError, SyntaxError):
        signature = inspect.signature(reference)

    def show(annotation: Any) -> str:
        return annotation.__name__ if isinstance(annotation, type) else str(annotation)

    parts = []
    for parameter in signature.parameters.values():
        text = parameter.name
        if parameter.annotation is not inspect.Parameter.empty:
            text += f": {show(parameter.annotation)}"
        if parameter.default is not inspect.Parameter.empty:
            text += f" = {parameter.default!r}"
        parts.append(text)
    return f"{name}({', '.join(parts)})"


@contextmanager
def signature_hint(what: str, reference: Any) -> Iterator[None]:
    """A learner's call inside the block (through :func:`call_torch`) that raised a TypeError
    fails with a hint: ``what`` must accept the arguments of ``reference``."""
    try:
        yield
    except CheckFailure as exc:
        if isinstance(exc.__cause__, TypeError):
            raise CheckFailure(f"{exc} Hint: {what} must accept the arguments of "
                               f"{expected_signature(reference)}.") from exc.__cause__
        raise


def construct(ctx: CheckContext, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> nn.Module:
    """Instantiate the learner's class ``fn(*args, **kwargs)`` and check it is an ``nn.Module``.

    Raises:
        CheckFailure: the constructor raised (a TypeError adds the expected signature, taken
            from ``ctx.reference``) or returned something that is not an ``nn.Module``.
    """
    torch = _torch()
    signature = expected_signature(ctx.reference)
    # Leave the learner's random stream alone.
    with signature_hint("the constructor", ctx.reference), torch.random.fork_rng(devices=[]):
        module = call_torch(fn, *args, **kwargs)
    if not isinstance(module, torch.nn.Module):
        fail(f"{_name_of(fn)}(...) returned {describe(module)}, expected an instance of a "
             f"torch.nn.Module subclass: define `class {getattr(ctx.reference, '__name__', 'X')}"
             f"(nn.Module)` with `__init__` = {signature} and call `super().__init__()` first.")
    return module


# ----------------------------------------------------------------------------- weights


def random_tensor(
    rng: np.random.Generator, shape: Sequence[int], scale: float = 1.0, requires_grad: bool = False
) -> Tensor:
    """A float64 tensor of independent normal entries with standard deviation ``scale``."""
    torch = _torch()
    # np.asarray: a 0-d draw comes back as a NumPy scalar, which torch.from_numpy rejects.
    data = torch.from_numpy(np.asarray(scale * rng.standard_normal(tuple(shape))))
    return data.requires_grad_(requires_grad)


def randomize_parameters(module: nn.Module, rng: np.random.Generator) -> None:
    """Overwrite every parameter of ``module`` with values drawn from ``rng``.

    Matrices get entries of standard deviation ``1 / sqrt(fan_in)``; 1-D weights (LayerNorm
    gains) scatter around 1 and biases around 0, with different values everywhere, so that
    swapped, unused or zero-initialised parameters change the result.
    """
    torch = _torch()
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            shape = tuple(parameter.shape)
            if parameter.dim() >= 2:
                values = rng.standard_normal(shape) / np.sqrt(shape[-1])
            elif name.endswith("weight"):
                values = 1.0 + 0.4 * rng.standard_normal(shape)
            else:
                values = 0.4 * rng.standard_normal(shape)
            parameter.copy_(torch.from_numpy(values))


def _buffer_names(module: nn.Module) -> set[str]:
    return {name for name, _ in module.named_buffers()}


def load_reference_weights(reference: nn.Module, learner: nn.Module, what: str) -> None:
    """Load ``reference.state_dict()`` into ``learner``, strictly on parameter names.

    The learner's state may hold, beyond the reference's keys, only buffers that the reference
    also has (non-persistent there, e.g. the positional-encoding table ``pe``).

    Raises:
        CheckFailure: missing or unexpected keys (listed, with the expected names), a parameter
            where the reference has a buffer, or parameters of other shapes.
    """
    learner_state = learner.state_dict()
    # Other layouts of the same weights (a fused qkv projection) get them in their own names.
    reference_state = adapt_state(reference.state_dict(), learner_state)
    learner_parameters = {name for name, _ in learner.named_parameters()}
    reference_buffers = _buffer_names(reference)
    missing = [k for k in reference_state if k not in learner_state]
    unexpected = [k for k in learner_state
                  if k not in reference_state
                  and not (k in reference_buffers and k not in learner_parameters)]
    as_parameter = [k for k in unexpected if k in reference_buffers]
    if as_parameter:
        fail(f"{what}: {', '.join(repr(k) for k in as_parameter)} is an nn.Parameter, so the "
             f"optimiser would train it; it is a fixed table: store it with "
             f"self.register_buffer({as_parameter[0]!r}, tensor) instead.")
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing keys {missing}")
        if unexpected:
            parts.append(f"unexpected keys {unexpected}")
        expected = f"the parameters {[n for n, _ in reference.named_parameters()]}"
        if reference_buffers:
            expected += f" and the buffers {sorted(reference_buffers)}"
        fail(f"{what}: the grader copies the reference weights into your module with "
             f"load_state_dict, and the names do not match: {'; '.join(parts)}. Expected "
             f"{expected}: name the sub-modules and layers as in the exercise "
             f"(e.g. self.w_q = nn.Linear(...)).{naming_advice(learner_state)}")
    shapes = [f"{k}: expected {tuple(v.shape)}, got {tuple(learner_state[k].shape)}"
              for k, v in reference_state.items() if learner_state[k].shape != v.shape]
    if shapes:
        fail(f"{what}: some weights have the wrong shape ({'; '.join(shapes)}). Note that "
             f"nn.Linear(in_features, out_features) stores a weight of shape (out, in).")
    try:
        learner.load_state_dict(reference_state, strict=False)
    except Exception as exc:  # a learner's own load hooks may fail
        fail(f"{what}: load_state_dict of the reference weights raised "
             f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class ModulePair:
    """The reference module and the learner's, with equal weights, float64, in eval mode.

    Attributes:
        reference: built from ``ctx.reference``.
        learner: built from the learner's class.
        what: how messages name the module, e.g. ``"MultiHeadAttention(16, 4, 0.2)"``.
    """

    reference: nn.Module
    learner: nn.Module
    what: str


def build_modules(
    ctx: CheckContext, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> ModulePair:
    """Build the reference ``ctx.reference(*args, **kwargs)`` with random weights from
    ``ctx.rng`` and the learner's ``fn(*args, **kwargs)`` with the same weights.

    Pass the configuration positionally where the reference allows it: the hidden checks then
    record it as the call's arguments. Both modules end in float64 and eval mode.

    Raises:
        CheckFailure: see :func:`construct` and :func:`load_reference_weights`.
    """
    torch = _torch()
    with torch.random.fork_rng(devices=[]):
        reference = ctx.reference(*args, **kwargs)
    randomize_parameters(reference, ctx.rng)
    learner = construct(ctx, fn, *args, **kwargs)
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    what = f"{getattr(ctx.reference, '__name__', 'module')}({', '.join(shown)})"
    load_reference_weights(reference, learner, what)
    try:
        learner.double().eval()
    except Exception as exc:
        fail(f"{what}: .double().eval() raised {type(exc).__name__}: {exc}")
    return ModulePair(reference.double().eval(), learner, what)


@functools.cache
def graded_model_class(base: type, builder: str, describe: Callable[[dict[str, Any]], str]
                       ) -> type:
    """A subclass of the course's model class ``base`` for the models the checks hand to a
    learner's decoding or caching code (see ``builders`` of
    :class:`autograder.exercises.registry.Exercise`).

    Its instances compare equal by configuration and weights (two draws of the same
    secret-seeded model are equal inputs), show ``describe(config)`` as their repr (readable
    messages), and carry a recipe by which the learner's process rebuilds the same model:
    ``builder(**config)`` with these weights. Put a model in it with
    ``model.__class__ = graded_model_class(...)``.
    """
    torch = _torch()

    def equal(self: Any, other: object) -> bool:
        if type(other) is not type(self) or other.config != self.config:
            return False
        mine, theirs = self.state_dict(), other.state_dict()
        return mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k])
                                                    for k in mine)

    def recipe(self: Any) -> dict[str, Any]:
        return {"builder": builder, "args": (), "kwargs": dict(self.config),
                "state": self.state_dict(), "dtype": next(self.parameters()).dtype,
                "training": self.training}

    return type(f"Graded{base.__name__}", (base,), {
        "__eq__": equal, "__hash__": torch.nn.Module.__hash__,
        "__repr__": lambda self: describe(self.config), "grading_recipe": recipe,
        "__module__": __name__})


# ----------------------------------------------------------------------------- comparing


def to_numpy(tensor: Tensor) -> np.ndarray:
    """A NumPy copy of ``tensor`` (detached, on the CPU)."""
    return tensor.detach().cpu().numpy()


def expect_tensor(got: Any, what: str, shape: Sequence[int] | None = None) -> Tensor:
    """Check that ``got`` is a floating torch tensor (of ``shape`` if given) and return it."""
    torch = _torch()
    if not isinstance(got, torch.Tensor):
        extra = ""
        if isinstance(got, (tuple, list)):
            extra = " Return a single tensor here, not a tuple or list."
        elif isinstance(got, np.ndarray):
            extra = " Stay in torch (no .numpy()) so that autograd can follow the computation."
        fail(f"{what}: expected a torch.Tensor, got {describe(got)}.{extra}")
    if shape is not None and tuple(got.shape) != tuple(shape):
        message = f"{what}: expected shape {tuple(shape)}, got {tuple(got.shape)}."
        if sorted(got.shape) == sorted(shape):
            message += " The axes look permuted: check your transposes."
        fail(message)
    return got


def compare_tensors(
    got: Any, expected: Tensor, what: str, *, hints: Iterable[Hint] = ()
) -> Tensor:
    """Check the learner's tensor ``got`` against ``expected`` (shape, dtype kind, values).

    Values use the course tolerances of ``expected``'s dtype; boolean and integer tensors must
    match exactly and keep their kind (the advice is torch's: ``.bool()``, ``.long()``). Hints
    see the learner's values as a NumPy array (``Hint.buggy`` may be a NumPy array or a
    tensor); they also explain a wrong shape.
    """
    torch = _torch()
    got = expect_tensor(got, what)
    hints = [replace(h, buggy=to_numpy(h.buggy)) if isinstance(h.buggy, torch.Tensor) else h
             for h in hints]
    if tuple(got.shape) == tuple(expected.shape):
        _expect_kind(got, expected, what)
    compare(to_numpy(got), to_numpy(expected), what, hints=hints)
    return got


def _expect_kind(got: Tensor, expected: Tensor, what: str) -> None:
    """A bool, integer or floating ``expected`` needs a ``got`` of the same kind."""
    torch = _torch()
    if expected.dtype == torch.bool and got.dtype != torch.bool:
        right = bool(((got == 0) | (got == 1)).all()) and torch.equal(got != 0, expected)
        fail(f"{what}: expected a bool tensor, got dtype {str(got.dtype).removeprefix('torch.')}"
             f"{' (the 0s and 1s are in the right places)' if right else ''}. Masks are bool "
             f"tensors: build them from comparisons (such as tgt_in != pad_id) and &, or "
             f"convert with .bool().")
    if not expected.dtype.is_floating_point and expected.dtype != torch.bool \
            and got.dtype != expected.dtype:
        wanted = str(expected.dtype).removeprefix("torch.")
        fail(f"{what}: expected a {wanted} tensor of ids, got dtype "
             f"{str(got.dtype).removeprefix('torch.')}. Keep the ids' dtype (torch.full_like "
             f"and torch.cat keep it), or convert with .long().")
    if expected.dtype.is_floating_point and not got.dtype.is_floating_point:
        fail(f"{what}: expected a floating-point tensor, got dtype "
             f"{str(got.dtype).removeprefix('torch.')}. Convert with .to(x.dtype).")


def _float_leaves(inputs: Sequence[Any]) -> list[Any]:
    """Copies of ``inputs`` in which every floating tensor is a fresh leaf requiring grad."""
    torch = _torch()
    return [x.detach().clone().requires_grad_(True)
            if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def _worst(got: np.ndarray, expected: np.ndarray) -> float:
    """How far ``got`` is outside the float64 tolerance of ``expected`` (<= 1: inside)."""
    rtol, atol = FLOAT64_TOLERANCE
    if got.shape != expected.shape:
        return np.inf
    ratio = np.abs(got - expected) / (atol + rtol * np.abs(expected))
    return float(np.nan_to_num(ratio, nan=np.inf).max(initial=0.0))


def agrees(got: Tensor, expected: Tensor) -> bool:
    """Whether ``got`` has the shape of ``expected`` and its values within the float64
    tolerance."""
    return _worst(to_numpy(got).astype(np.float64), to_numpy(expected)) <= 1


def compare_forward(ctx: CheckContext, pair: ModulePair, inputs: Sequence[Any], *,
                    call_description: str | None = None, hints: Iterable[Hint] = (),
                    gradients: bool = True, input_names: Sequence[str] | None = None) -> Tensor:
    """Run both modules on ``inputs``, compare the outputs, then the gradients.

    The gradients are those of ``sum(out * cotangent)`` for one random ``cotangent`` drawn
    from ``ctx.rng``: with respect to every floating tensor in ``inputs`` and every parameter
    of the reference. A failing parameter gradient is reported for the parameter with the
    largest error.

    Args:
        inputs: positional arguments of ``forward`` (tensors; masks and other values are
            passed as they are).
        call_description: how messages name the call, default
            ``"MultiHeadAttention(16, 4, 0.2) on inputs (2, 5, 16), ..."``.
        hints: for the forward output (see :class:`autograder.exercises.checking.Hint`).
        gradients: False compares the outputs only.
        input_names: how messages name the inputs (``"query"``); default ``"input 1"``, ...
            An input whose gradient is zero although the reference's is not is named first:
            the learner's forward does not use it.

    Returns:
        The learner's output.
    """
    torch = _torch()
    shapes = ", ".join(describe_tensor(x) for x in inputs)
    what = call_description or f"{pair.what} applied to ({shapes})"
    pair.reference.zero_grad(set_to_none=True)
    pair.learner.zero_grad(set_to_none=True)
    reference_inputs = _float_leaves(inputs)
    learner_inputs = _float_leaves(inputs)
    expected = pair.reference(*reference_inputs)
    got = call_torch(pair.learner, *learner_inputs)
    compare_tensors(got, expected.detach(), f"output of {what}", hints=hints)
    if not gradients:
        return got
    if not got.requires_grad:
        fail(f"output of {what}: autograd cannot reach the inputs or weights from your output "
             "(it does not require grad). Avoid .detach(), .data, .numpy(), torch.tensor(...) "
             "of intermediate results and torch.no_grad() in forward.")
    cotangent = random_tensor(ctx.rng, tuple(expected.shape))
    (expected * cotangent).sum().backward()
    call(lambda: (got * cotangent).sum().backward())
    given = list(input_names or ())
    names = [given[i] if i < len(given) else f"input {i + 1}" for i in range(len(inputs))]
    grads = [(name, ref_x.grad, x.grad if x.grad is not None else torch.zeros_like(x))
             for name, ref_x, x in zip(names, reference_inputs, learner_inputs, strict=True)
             if isinstance(ref_x, torch.Tensor) and ref_x.requires_grad]
    unused = [name for name, expected, got in grads
              if not bool(got.any()) and bool(expected.any())]
    if unused:
        them = "it" if len(unused) == 1 else "them"
        fail(f"{what}: the output does not depend on {' and '.join(unused)} (the gradient with "
             f"respect to {them} is zero), so forward never uses {them}.")
    for name, expected, got in grads:
        compare_tensors(got, expected, f"gradient with respect to {name} of {what}")
    _compare_parameter_gradients(pair, what)
    return got


def _compare_parameter_gradients(pair: ModulePair, what: str) -> None:
    # Every name of a tied parameter: the learner may have tied the other way round.
    learner_parameters = dict(pair.learner.named_parameters(remove_duplicate=False))
    reference_state = pair.reference.state_dict()
    mapping = layout_mapping(reference_state, pair.learner.state_dict(), reference_state)
    errors: dict[str, float] = {}
    grads: dict[str, Tensor] = {}
    for name, parameter in pair.reference.named_parameters():
        grad = grads[name] = learner_gradient(name, learner_parameters, mapping)
        if grad is None:
            fail(f"{what}: parameter {name!r} received no gradient: forward does not use it "
                 f"(or uses a detached copy). Use self.{name.rsplit('.', 1)[0]} in forward.")
        errors[name] = _worst(to_numpy(grad), to_numpy(parameter.grad))
    bad = [name for name, error in errors.items() if error > 1]
    if bad:
        name = max(bad, key=lambda n: errors[n])
        reference_grad = dict(pair.reference.named_parameters())[name].grad
        learner_grad = grads[name]
        others = f" ({len(bad)} of {len(errors)} parameters have wrong gradients)"
        compare_tensors(learner_grad, reference_grad,
                        f"gradient of parameter {name!r} of {what}{others}")


# ----------------------------------------------------------------------------- properties


def expect_buffer(module: nn.Module, name: str, what: str) -> Tensor:
    """Check that ``module`` holds ``name`` as a buffer, not as a parameter, and return it."""
    if name in dict(module.named_parameters()):
        fail(f"{what}: {name!r} is an nn.Parameter, so model.parameters() hands it to the "
             f"optimiser, which would train it. Register it with self.register_buffer"
             f"({name!r}, tensor).")
    buffers = dict(module.named_buffers())
    if name not in buffers:
        fail(f"{what}: no buffer named {name!r}; register the table with "
             f"self.register_buffer({name!r}, tensor) (buffers: {sorted(buffers)}).")
    return buffers[name]


def expect_deterministic(module: nn.Module, inputs: Sequence[Any], what: str) -> None:
    """Two eval-mode calls on the same inputs must agree (dropout must be off in eval mode)."""
    torch = _torch()
    module.eval()
    with torch.no_grad():
        first = expect_tensor(call_torch(module, *inputs), f"output of {what}")
        second = expect_tensor(call_torch(module, *inputs), f"output of {what}")
    if first.shape != second.shape or not torch.equal(first, second):
        fail(f"{what}: two calls in eval mode on the same input gave different outputs, so "
             "dropout is still active after model.eval(). Use nn.Dropout modules, or pass "
             "training=self.training to F.dropout.")


def manual_seed(learner: Any, seed: int) -> None:
    """Seed the random generators that the learner's ``module`` (or function) draws from:
    those of the learner's process when it runs there (a proxy of
    :mod:`autograder.sandbox.client`), torch's own otherwise."""
    remote = getattr(learner, "_remote", None) or getattr(learner, "process", None)
    process = getattr(remote, "process", remote)
    if process is not None and hasattr(process, "seed"):
        process.seed(seed)
    else:
        _torch().manual_seed(seed)


@contextmanager
def training_mode(module: nn.Module, frozen: Sequence[str] = (),
                  only: Sequence[str] | None = None) -> Iterator[None]:
    """Within the block ``module`` is in training mode except its sub-modules named in
    ``frozen`` (e.g. ``"self_attn"``), which stay in eval mode; or, given ``only``, just the
    sub-modules named there are in training mode (except those in ``frozen`` below them) and
    all else is in eval mode. Afterwards all is in eval mode."""
    try:
        if only is None:
            module.train()
        else:
            module.eval()
            for name in only:
                module.get_submodule(name).train()
        for name in frozen:
            module.get_submodule(name).eval()
        yield
    finally:
        module.eval()


def training_output(module: nn.Module, inputs: Sequence[Any], seed: int, what: str,
                    frozen: Sequence[str] = (), only: Sequence[str] | None = None) -> Tensor:
    """The output of ``module`` in training mode (see :func:`training_mode`) on ``inputs``,
    with its random generator seeded with ``seed`` just before the call."""
    torch = _torch()
    with training_mode(module, frozen, only), torch.no_grad(), \
            torch.random.fork_rng(devices=[]):
        manual_seed(module, seed)
        return expect_tensor(call_torch(module, *inputs), f"output of {what} in training mode")


def expect_dropout_probability(module: nn.Module, p: float, what: str, parts: str) -> None:
    """Every ``nn.Dropout`` inside ``module`` that drops anything drops with probability ``p``
    (the dropout argument it was built with); ``parts`` says where to pass it, for the
    message. A dropout layer of rate 0 drops nothing and is left alone: where dropout is
    optional (the attention weights), having none is allowed."""
    torch = _torch()
    probabilities = sorted({float(m.p) for m in module.modules()
                            if isinstance(m, torch.nn.Dropout) and float(m.p) > 0.0})
    if probabilities and probabilities != [p]:
        fail(f"{what}: the dropout layers use p = {probabilities}, but dropout={p} was "
             f"passed: pass the dropout argument on to every part ({parts}).")


NOT_DROPPED = "no value was dropped"


def dropout_problem(got: Tensor, base: Tensor, p: float, required: bool = True) -> str | None:
    """Whether ``got`` is ``base`` after dropout with probability ``p``: every entry either 0
    or ``base / (1 - p)``. None when it is; otherwise a sentence that says what differs
    (:data:`NOT_DROPPED` when ``got`` is ``base`` itself).

    Args:
        required: False accepts ``got == base`` too (a place where dropout is optional).

    Entries where ``base`` is (nearly) 0 tell nothing and are skipped.
    """
    scale = float(base.abs().max())
    if scale == 0.0:
        return None
    informative = base.abs() > 1e-4 * scale
    got, base = got[informative], base[informative]
    tolerance = 1e-7 * scale / (1.0 - p)
    dropped = got.abs() < tolerance
    kept = (got - base / (1.0 - p)).abs() < tolerance
    unscaled = (got - base).abs() < tolerance
    if bool((dropped | kept).all()) and bool(dropped.any()) and bool(kept.any()):
        return None
    if bool(unscaled.all()) or not bool(dropped.any()):
        return None if not required and bool(unscaled.all()) else NOT_DROPPED
    if bool((dropped | unscaled).all()):
        return ("some values were set to 0 but the others were not divided by 1 - p "
                "(nn.Dropout does both)")
    # One factor for every kept value (estimated where the values are large, so that the
    # rounding of the eval-mode values hardly shows): dropout at another rate, or twice.
    strong = ~dropped & (base.abs() > 0.1 * scale)
    ratio = float((got[strong] / base[strong]).median()) if bool(strong.any()) else 0.0
    if ratio > 1 and bool(((got[~dropped] - ratio * base[~dropped]).abs()
                           < 1e-7 * scale * ratio).all()):
        if abs(ratio * (1.0 - p) ** 2 - 1.0) < 1e-5:
            return (f"the values that were kept are scaled by {ratio:.4g} = 1 / (1 - p)^2, so "
                    f"dropout acts twice on the same values: apply it once")
        seen = 1.0 - 1.0 / ratio
        return (f"the values that were kept are scaled by {ratio:.4g} = 1 / (1 - "
                f"{seen:.3g}), as for dropout p = {seen:.3g}, not p = {p}: use the dropout "
                f"argument")
    return ("the values are not the eval-mode values with some set to 0 and the others "
            "multiplied by 1 / (1 - p)")


def check_causal(
    module: nn.Module,
    make_inputs: Callable[[Tensor], Sequence[Any]],
    x: Tensor,
    position: int,
    what: str,
) -> None:
    """Outputs at positions ``<= position`` must not change when later positions of ``x`` do.

    Args:
        make_inputs: builds ``forward``'s arguments from the sequence ``x`` (B, L, ...).
        x: a sequence batch ``(B, L, ...)``; positions ``position + 1 ..`` get new values.
    """
    torch = _torch()
    changed = x.detach().clone()
    changed[:, position + 1:] = 1.0 - 2.0 * changed[:, position + 1:]
    with torch.no_grad():
        before = expect_tensor(call_torch(module, *make_inputs(x)), f"output of {what}")
        after = expect_tensor(call_torch(module, *make_inputs(changed)), f"output of {what}")
    compare_tensors(after[:, : position + 1], before[:, : position + 1],
                    f"{what}: outputs at positions 0..{position} after changing the inputs at "
                    f"later positions (a causal mask must hide the future)")


def check_padding_invariant(
    module: nn.Module,
    make_inputs: Callable[[Tensor], Sequence[Any]],
    x: Tensor,
    lengths: Sequence[int],
    what: str,
) -> None:
    """Outputs at real positions must not change when the padded positions of ``x`` do.

    Args:
        make_inputs: builds ``forward``'s arguments from ``x`` (B, L, ...), including a mask
            that hides the padding.
        lengths: the number of real positions of each sequence in the batch.
    """
    torch = _torch()
    changed = x.detach().clone()
    for b, length in enumerate(lengths):
        changed[b, length:] = 5.0 * torch.ones_like(changed[b, length:])
    with torch.no_grad():
        before = expect_tensor(call_torch(module, *make_inputs(x)), f"output of {what}")
        after = expect_tensor(call_torch(module, *make_inputs(changed)), f"output of {what}")
    for b, length in enumerate(lengths):
        compare_tensors(after[b, :length], before[b, :length],
                        f"{what}: outputs of sequence {b} at its {length} real positions after "
                        f"changing its padded positions (the mask must hide padding)")


def padding_lengths(rng: np.random.Generator, batch: int, length: int) -> list[int]:
    """Random sequence lengths in ``1 .. length``; the first is full and one is shorter."""
    lengths = [length] + [int(n) for n in rng.integers(1, length + 1, size=batch - 1)]
    if batch > 1 and min(lengths) == length:
        lengths[-1] = int(rng.integers(1, length))
    return lengths


def key_padding_mask(lengths: Sequence[int], length: int) -> Tensor:
    """Bool ``(B, 1, 1, length)``: True for the real positions ``< lengths[b]``."""
    torch = _torch()
    positions = torch.arange(length)
    return (positions[None, :] < torch.tensor(list(lengths))[:, None])[:, None, None, :]


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread: tiny models decoded step by step are many times faster so,
    above all when other programs share the cores. The thread count is restored afterwards."""
    torch = _torch()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
