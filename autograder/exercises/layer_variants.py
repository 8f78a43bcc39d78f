"""Encoder and decoder layers recomputed from a reference layer's own sub-modules, with known
differences switched on: the hints and the training-mode checks of chapters 7 and 8.

A layer is a list of :class:`Step` (a sub-layer and the norm of its residual connection);
:func:`run` applies them with one residual-connection recipe. The switches cover what
learners and tutorials do differently: the order of norm and sub-layer (post-LN and pre-LN),
the layer-norm formula (the unbiased standard deviation, ``eps`` added to the standard
deviation instead of the variance, as the Annotated Transformer writes it, with its eps of
1e-6 or nn.LayerNorm's 1e-5), a missing residual
path, and where the layer's own dropout acts (:func:`check_layer_dropout` applies the paper's
dropout rules of :mod:`autograder.exercises.dropout_rules` to a layer).

torch is imported inside the functions, so importing this module stays torch-free.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from autograder.exercises.checking import CheckContext, Hint, fail
from autograder.exercises.dropout_rules import check_dropout_placement
from autograder.exercises.torch_checking import (
    NOT_DROPPED,
    ModulePair,
    compare_tensors,
    dropout_problem,
    load_reference_weights,
    manual_seed,
    training_mode,
    training_output,
)

if TYPE_CHECKING:
    from torch import Tensor, nn

# Where the layer's own dropout acts: on the sub-layer's output (right), nowhere, after the
# norm, or on the sum that includes the residual path.
DROPOUT_PLACES = ("output", "none", "after_norm", "on_sum")


@dataclass(frozen=True)
class Step:
    """One sub-layer of a layer and the LayerNorm of its residual connection (``residual``
    False: a layer that forgot this step's residual path)."""

    sublayer: Callable[[Tensor], Tensor]
    norm: nn.Module
    residual: bool = True


# The values of eps that layer norms written by hand add to the standard deviation.
EPS_ON_STD = (1e-5, 1e-6)


def layer_norm(h: Tensor, norm: nn.Module, *, unbiased: bool = False,
               eps_on_std: float | None = None) -> Tensor:
    """``norm(h)`` with ``norm``'s gain and shift, in one of the formulas learners use: the
    biased or the unbiased variance, ``norm.eps`` inside the square root or ``eps_on_std``
    added to the standard deviation."""
    if not unbiased and eps_on_std is None:
        return norm(h)
    centred = h - h.mean(dim=-1, keepdim=True)
    var = h.var(dim=-1, keepdim=True, unbiased=unbiased)
    std = (var + norm.eps).sqrt() if eps_on_std is None else var.sqrt() + eps_on_std
    return centred / std * norm.weight + norm.bias


def connection(x: Tensor, step: Step, dropout: Callable[[Tensor], Tensor], *, norm_first: bool,
               unbiased: bool = False, eps_on_std: float | None = None, residual: bool = True,
               dropout_at: str = "output") -> Tensor:
    """One residual connection: post-LN ``norm(x + dropout(sublayer(x)))`` or pre-LN
    ``x + dropout(sublayer(norm(x)))``, with the switches of the module docstring."""
    def norm(h: Tensor) -> Tensor:
        return layer_norm(h, step.norm, unbiased=unbiased, eps_on_std=eps_on_std)

    def drop(h: Tensor, place: str) -> Tensor:
        return dropout(h) if dropout_at == place else h

    kept = x if residual and step.residual else 0.0
    if norm_first:
        return drop(kept + drop(step.sublayer(norm(x)), "output"), "on_sum")
    return drop(norm(drop(kept + drop(step.sublayer(x), "output"), "on_sum")), "after_norm")


def run(x: Tensor, steps: Sequence[Step], dropout: Callable[[Tensor], Tensor], *,
        norm_first: bool, **switches: Any) -> Tensor:
    """The layer's output: each step in turn, in a residual connection (see
    :func:`connection` for the switches)."""
    for step in steps:
        x = connection(x, step, dropout, norm_first=norm_first, **switches)
    return x


def order_words(norm_first: bool) -> str:
    return "pre-LN, x + sublayer(norm(x))" if norm_first else "post-LN, norm(x + sublayer(x))"


def norm_hints(variant: Callable[..., Tensor], norm_first: bool, because: str = "") -> list[Hint]:
    """Hints for the order of norm and sub-layer and for the layer-norm formula, one
    difference or several at once (the message names each of them).

    Args:
        variant: computes the layer's output with switches of :func:`connection` (and
            ``norm_first``), with the reference's weights on the checked inputs.
        norm_first: the order the layer must have.
        because: why it must have that order, for the message (e.g. "norm_first=True").
    """
    hints: list[tuple[int, Hint]] = []
    for wrong_order, unbiased, eps_on_std in itertools.product((False, True), (False, True),
                                                                (None, *EPS_ON_STD)):
        differences = []
        if wrong_order:
            reason = f" ({because})" if because else ""
            differences.append(f"the residual connections are {order_words(not norm_first)}, "
                               f"where this layer is {order_words(norm_first)}{reason}")
        if unbiased:
            differences.append("the layer norm divides by the unbiased standard deviation "
                               "(x.std() divides by d - 1) where layer norm divides by d "
                               "(x.var(-1, unbiased=False))")
        if eps_on_std is not None:
            differences.append("eps is added to the standard deviation where it belongs "
                               "inside the square root, sqrt(var + eps)")
        if not differences:
            continue
        if len(differences) == 1:
            message = differences[0] + "."
        else:
            listed = "; ".join(f"({i}) {d}" for i, d in enumerate(differences, 1))
            message = f"{len(differences)} differences at once: {listed}."
        if unbiased or eps_on_std is not None:
            message += " nn.LayerNorm(d_model) normalises as the course does."
        output = variant(norm_first=norm_first != wrong_order, unbiased=unbiased,
                         eps_on_std=eps_on_std)
        hints.append((len(differences), Hint(message, buggy=output)))
    # Fewer differences first: on ordinary inputs eps's place hardly shows, so a hint that
    # claims it must not win there.
    return [hint for _, hint in sorted(hints, key=lambda item: item[0])]


# Rows of nearly constant values: their standard deviation is small enough for the place of
# eps in the layer norm to show, and large enough for eps's value (1e-5 or 1e-6) not to.
QUIET_STD = 0.03


def quiet_rows(rng: np.random.Generator, shape: Sequence[int]) -> Tensor:
    """A float64 tensor whose rows (last axis) vary by about :data:`QUIET_STD` around a
    random offset each."""
    import torch

    offsets = rng.uniform(-1.0, 1.0, size=tuple(shape[:-1]) + (1,))
    return torch.from_numpy(offsets + QUIET_STD * rng.standard_normal(tuple(shape)))


@contextmanager
def silenced(pair: ModulePair, sublayers: Sequence[str]) -> Iterator[None]:
    """Within the block the sub-layers named in ``sublayers`` add nothing: their output
    projections (``w_o`` of an attention, ``w_2`` of a feed-forward network) are zero, in both
    modules, so that what follows sees the input of the silenced step itself; afterwards both
    modules have their weights back."""
    import torch

    state = {k: v.clone() for k, v in pair.reference.state_dict().items()}
    with torch.no_grad():
        for name in sublayers:
            module = pair.reference.get_submodule(name)
            projection = module.w_o if hasattr(module, "w_o") else module.w_2
            projection.weight.zero_()
            projection.bias.zero_()
    load_reference_weights(pair.reference, pair.learner, pair.what)
    try:
        yield
    finally:
        pair.reference.load_state_dict(state)
        load_reference_weights(pair.reference, pair.learner, pair.what)


# The paper's dropout rate, which learners type in instead of passing the argument on.
TYPED_IN_RATE = 0.1


def residual_words(norm_first: bool) -> str:
    """Where a layer's own dropout acts, as a formula."""
    return "x + dropout(sublayer(norm(x)))" if norm_first else "norm(x + dropout(sublayer(x)))"


def _residual_hints(reference: nn.Module, x: Tensor,
                    steps: Callable[[nn.Module], Sequence[Step]],
                    seeded: Callable[[Callable[[], Tensor]], Tensor],
                    norm_first: bool) -> list[Hint]:
    """The hints of :func:`check_residual_dropout`: the reference layer run on ``x`` with its
    dropout in the other places, each computed by ``seeded`` (the learner's seed)."""
    import torch

    def twice(h: Tensor) -> Tensor:
        return reference.dropout(reference.dropout(h))

    def typed_in(h: Tensor) -> Tensor:  # the paper's rate, typed in instead of the argument
        return torch.nn.functional.dropout(h, TYPED_IN_RATE, training=True)

    place_words = {
        "none": "the sub-layer outputs get no dropout",
        "after_norm": "dropout acts after the layer norm",
        "on_sum": "dropout acts on the sum that includes the residual x, so x itself is dropped",
    }
    where = residual_words(norm_first)
    hints = [Hint(f"{words}: apply the layer's dropout to each sub-layer's output before it is "
                  f"added to x, {where}.",
                  buggy=seeded(lambda place=place: run(x, steps(reference), reference.dropout,
                                                       norm_first=norm_first,
                                                       dropout_at=place)))
             for place, words in place_words.items()]
    hints.append(Hint(f"dropout acts twice on each sub-layer's output: apply it once, {where}.",
                      buggy=seeded(lambda: run(x, steps(reference), twice,
                                               norm_first=norm_first))))
    if reference.dropout.p != TYPED_IN_RATE:
        hints.append(Hint(f"the sub-layer outputs are dropped with p={TYPED_IN_RATE} typed in, "
                          f"not with the layer's dropout argument (p={reference.dropout.p}): "
                          f"build the dropout from the argument.",
                          buggy=seeded(lambda: run(x, steps(reference), typed_in,
                                                   norm_first=norm_first))))
    return hints


def check_residual_dropout(
    ctx: CheckContext, pair: ModulePair, inputs: Sequence[Any], sublayers: Sequence[str],
    steps: Callable[[nn.Module], Sequence[Step]], norm_first: bool, what: str,
) -> None:
    """The layer's own dropout acts on each sub-layer's output, before the residual sum, once.

    The sub-layers (``sublayers``, e.g. ``("self_attn", "feed_forward")``) stay in eval mode,
    so that only the layer's own dropout acts, wherever the layer keeps it (``self.dropout``,
    one module per sub-layer, d2l's ``AddNorm``, ``F.dropout``); learner and reference run
    with the same seed, so the same dropout calls draw the same masks and the outputs must
    agree. Hints name the other places (none, after the norm, on the sum with the residual,
    twice), computed with the same seed.

    Args:
        steps: the layer's steps built from a layer (the reference's, for the hints).
    """
    import torch

    seed = int(ctx.rng.integers(0, 2**31))
    got = training_output(pair.learner, inputs, seed, what, frozen=sublayers)
    reference = pair.reference

    def seeded(compute: Callable[[], Tensor]) -> Tensor:
        with training_mode(reference, sublayers), torch.no_grad(), \
                torch.random.fork_rng(devices=[]):
            manual_seed(reference, seed)
            return compute()

    expected = seeded(lambda: reference(*inputs))
    where = residual_words(norm_first)
    hints = _residual_hints(reference, inputs[0], steps, seeded, norm_first)
    compare_tensors(got, expected,
                    f"output of {what} in training mode with {' and '.join(sublayers)} in eval "
                    f"mode (so only the layer's own dropout acts, on each sub-layer's output: "
                    f"{where}) and the same random seed as the reference", hints=hints)


def _residual_problem(got: Tensor, x: Tensor, out: Tensor, p: float) -> str | None:
    """What is wrong with ``got`` as ``x + dropout(out)`` (pre-LN, one step): None when it is
    that, for some mask."""
    problem = dropout_problem(got - x, out, p)
    if problem is None:
        return None
    scale = float(x.abs().max())
    if bool(((got.abs() < 1e-9 * scale) & (x.abs() > 1e-3 * scale)).any()):
        return ("entries of the residual x itself are 0: dropout acts on the sum that includes "
                "the residual x, so x itself is dropped")
    if problem == NOT_DROPPED:
        return f"{problem}: the sub-layer outputs get no dropout"
    return problem


def check_pre_ln_residual_dropout(
    ctx: CheckContext, pair: ModulePair, inputs: Sequence[Any], sublayers: Sequence[str],
    steps: Callable[[nn.Module], Sequence[Step]], what: str,
) -> None:
    """Pre-LN: the layer's own dropout acts once on each sub-layer's output, before the residual
    add, read back from the output whatever order and memory layout the learner's masks have.

    The sub-layers stay in eval mode (only the layer's own dropout acts) and all but one are
    silenced (:func:`silenced`: they add exactly 0), so the layer computes
    ``x + dropout(sublayer(norm(x)))`` for that one: ``output - x`` must be its eval-mode
    output with some values set to 0 and the others divided by 1 - p. Unlike
    :func:`check_residual_dropout`, the masks need not be those the reference draws under the
    same seed: torch's ``nn.MultiheadAttention`` returns a transposed view, on which one seed
    drops other entries.

    Args:
        sublayers: the sub-layer modules, in the order of their steps in ``steps``.
        steps: as for :func:`check_residual_dropout`.
    """
    import torch

    x, p = inputs[0], float(pair.reference.dropout.p)
    for index, name in enumerate(sublayers):
        with silenced(pair, [other for other in sublayers if other != name]):
            got = training_output(pair.learner, inputs, int(ctx.rng.integers(0, 2**31)), what,
                                  frozen=sublayers)
            with torch.no_grad():
                step = steps(pair.reference)[index]
                out = step.sublayer(step.norm(x))
        problem = _residual_problem(got, x, out, p)
        if problem:
            fail(f"{what} in training mode, with {' and '.join(sublayers)} in eval mode (so "
                 f"only the layer's own dropout acts) and every sub-layer but {name} silenced "
                 f"(its output projection set to 0, so it adds nothing): reading the dropout on "
                 f"{name}'s output back from output - x, {problem}. Apply the layer's dropout "
                 f"(p={p}) once to each sub-layer's output, before it is added to x: "
                 f"{residual_words(True)}.")


def check_layer_dropout(
    ctx: CheckContext, pair: ModulePair, inputs: Sequence[Any], sublayers: Sequence[str],
    steps: Callable[[nn.Module], Sequence[Step]], norm_first: bool, p: float, what: str,
) -> None:
    """The paper's dropout in a layer of residual sub-layers, in training mode: required on
    each sub-layer's output before the residual add; accepted, not required, inside the
    sub-layers (attention weights, feed-forward hidden activations); see
    :mod:`autograder.exercises.dropout_rules` for the whole rule and how it is checked.

    The layer's own dropout is judged with the sub-layers in eval mode: a pre-LN layer's is
    read back from its output (:func:`check_pre_ln_residual_dropout`, any order and layout of
    masks); a post-LN layer's output is normalised after the add, which hides the masks, so it
    must draw the masks the reference draws under the same seed
    (:func:`check_residual_dropout`), as every ``nn.Dropout`` on a sub-layer's output does.

    Args:
        pair: built with dropout ``p`` and sizes the readers need (attention heads of width
            >= 3, ``d_ff < d_model``).
        sublayers: the names of the sub-layer modules in the order of their steps, e.g.
            ``("self_attn", "feed_forward")``.
        steps, norm_first: as for :func:`check_residual_dropout`.
    """
    def own() -> None:
        if norm_first:
            check_pre_ln_residual_dropout(ctx, pair, inputs, sublayers, steps, what)
        else:
            check_residual_dropout(ctx, pair, inputs, sublayers, steps, False, what)

    rule = (f"The paper drops each sub-layer's output before the residual add, "
            f"{residual_words(norm_first)}: pass the dropout argument on to nn.Dropout and "
            f"apply it there (dropout on the attention weights and on the feed-forward "
            f"network's hidden activations is allowed as well, not required).")
    check_dropout_placement(ctx, pair, inputs, p, what, optional=[[name] for name in sublayers],
                            own=own, rule=rule)
