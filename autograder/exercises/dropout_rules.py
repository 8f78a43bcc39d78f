"""Where dropout may act, checked in training mode: what the paper requires, what is accepted,
and what is rejected. Shared by every check of a module with dropout (chapters 7, 8 and 11, and
any later layer or model).

"Attention Is All You Need" (section 5.4, "Residual Dropout") applies dropout in two places: to
the output of each sub-layer, before it is added to the sub-layer's input and normalised, and
to the sums of the embeddings and the positional encodings. The Annotated Transformer adds two
more: the attention weights, and the hidden activations of the feed-forward network (as
PyTorch's ``nn.TransformerEncoderLayer`` does for the latter). The course's reference applies
all four. The checks require the paper's places and accept the others:

=======================  ===================================  ==================================
module                   required                             accepted, not required
=======================  ===================================  ==================================
multi-head attention     (none)                               the attention weights
feed-forward network     (none)                               the hidden activations
positional encoding      the sum ``x + pe``                   (nothing else)
encoder/decoder layer    each sub-layer's output, before the  dropout inside the sub-layers as
                         residual add                         above; the output's dropout held
                                                              by the sub-layer module itself
the model                embeddings + positions, and every    as for the layers
                         layer's sub-layer outputs
=======================  ===================================  ==================================

Rejected everywhere: dropout in eval mode, a rate other than the dropout argument, dropout twice
on one tensor, dropout after the residual add or after the norm, dropout anywhere else (queries,
keys, values, scores, the input, a sub-layer's output that the layer drops again), and no
dropout at all where a place is required.

How the checks see it (a module's random draws are the learner's own, so nothing here assumes
that masks are drawn the way the reference draws them unless it says so):

* :func:`check_attention_dropout` and :func:`check_feed_forward_dropout` read what was dropped
  back from the module's output (the attention weights through the inverse of ``w_o``, the
  hidden activations through the pseudo-inverse of ``w_2``): any way of drawing the mask passes.
* :func:`check_dropout_placement` judges a module built of sub-layers (a layer, a model): the
  learner's output in training mode either equals the reference's under the same seed with
  the optional places switched on or off (exactly an accepted placement, drawn as
  ``nn.Dropout`` draws), or the module's own dropout is checked with the optional sub-modules
  in eval mode (``own``), and each sub-module's dropout inside on its own, with the readers
  above. A layer's own dropout (:func:`autograder.exercises.layer_variants.check_layer_dropout`)
  is read back from a pre-LN layer's output, whatever its masks, and compared with the
  reference's under one seed in a post-LN layer, whose norm after the add hides the masks.
* :func:`check_model_dropout` judges a whole model the same way; its own places are compared
  with the reference's under one seed, and a model built of the learner's own layers may
  instead show its own dropout with every layer in eval mode and each layer dropping on its
  own (where a layer drops is that layer's exercise to judge).

torch is imported inside the functions, so importing this module stays torch-free.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from autograder.exercises.checking import CheckContext, CheckFailure, Hint, fail
from autograder.exercises.torch_checking import (
    ModulePair,
    agrees,
    build_modules,
    call_torch,
    compare_tensors,
    dropout_problem,
    expect_dropout_probability,
    expect_tensor,
    manual_seed,
    random_tensor,
    training_mode,
    training_output,
)

if TYPE_CHECKING:
    from torch import Tensor, nn

# What the advice says about each optional place.
ATTENTION_PLACE = (
    "the attention weights only (after the softmax, before they multiply the values), or "
    "nowhere inside the attention: the paper has no dropout there, the Annotated Transformer "
    "drops the weights"
)
FEED_FORWARD_PLACE = (
    "the hidden activations only, w_2(dropout(relu(w_1(x)))), or nowhere inside the network: "
    "the paper has no dropout there, the Annotated Transformer drops the hidden activations"
)
IN_LAYER = (" The layer drops this sub-layer's output itself (the paper's place), so a dropout "
            "on that output here as well would drop it twice.")


def training_dropout(rng: np.random.Generator) -> float:
    """A dropout probability for the training-mode checks: large, so that about half of the
    values are dropped, and rarely one a learner would have typed in (0.1, 0.5)."""
    return round(float(rng.uniform(0.35, 0.65)), 2)


def readable_layer(ctx: CheckContext, fn: Callable[..., Any], parts: str, *extra: Any
                   ) -> tuple[ModulePair, int, float]:
    """``(pair, d_model, p)``: the reference and the learner's layer for a training-mode check,
    ``fn(d_model, h, d_ff, p, *extra)`` with sizes that let the dropout inside its sub-layers be
    read back (two heads of width 5 to 7, ``d_ff < d_model``) and a rate from
    :func:`training_dropout`. Every dropout layer of the learner's that drops must have that
    rate (``parts``: where to pass it on, for the message)."""
    rng = ctx.rng
    h, d_k = 2, int(rng.integers(5, 8))
    d_ff = int(rng.integers(3, h * d_k // 2 + 1))
    p = training_dropout(rng)
    pair = build_modules(ctx, fn, h * d_k, h, d_ff, p, *extra)
    expect_dropout_probability(pair.learner, p, pair.what, parts)
    return pair, h * d_k, p


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**31))


def reference_training_output(reference: nn.Module, inputs: Sequence[Any], seed: int,
                              frozen: Sequence[str] = (),
                              only: Sequence[str] | None = None) -> Tensor:
    """The reference's output in training mode (see :func:`training_mode` for ``frozen`` and
    ``only``), seeded with ``seed`` just before the call, as :func:`training_output` seeds the
    learner's."""
    import torch

    with training_mode(reference, frozen, only), torch.no_grad(), \
            torch.random.fork_rng(devices=[]):
        manual_seed(reference, seed)
        return reference(*inputs)


# ----------------------------------------------------------------------------- inside sub-layers


def check_attention_dropout(learner: nn.Module, reference: nn.Module, rng: np.random.Generator,
                            p: float, what: str, *, in_layer: bool = False) -> None:
    """Dropout inside multi-head attention acts on the attention weights or nowhere.

    With fewer keys than the width of a head, a head's value vectors are independent, so the
    weights each query gave each key can be read back from the output (through the inverse of
    ``w_o``). They must be the eval-mode weights, or those with some set to 0 and the others
    divided by 1 - p; dropout anywhere else leaves an output that is no such combination.

    Args:
        learner: the learner's attention module (or the one inside the learner's layer), in
            float64, holding ``reference``'s weights; called as ``learner(query, key, value)``.
        reference: the course's ``MultiHeadAttention`` with the same weights and a head width
            ``d_k >= 3``.
        in_layer: the module is a sub-layer of a layer that drops its output itself.
    """
    import torch

    h, d_k = reference.h, reference.d_k
    if d_k < 3:
        raise ValueError(f"reading attention weights back needs heads of width >= 3, got {d_k}")
    batch, n_q, n_k = 4, 8, int(rng.integers(2, min(4, d_k)))
    query = random_tensor(rng, (batch, n_q, h * d_k))
    key, value = (random_tensor(rng, (batch, n_k, h * d_k)) for _ in range(2))
    got = training_output(learner, (query, key, value), _seed(rng), what)
    where = (f"{what} in training mode on query {tuple(query.shape)}, key and value "
             f"{tuple(key.shape)}")

    def split(t: Tensor) -> Tensor:
        return t.reshape(batch, t.size(-2), h, d_k).transpose(1, 2)

    with torch.no_grad():
        q, k = split(reference.w_q(query)), split(reference.w_k(key))
        v = split(reference.w_v(value))
        weights = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(dim=-1)
        w_o = reference.w_o
        merged = torch.linalg.solve(w_o.weight, (got - w_o.bias).transpose(-2, -1))
        heads = split(merged.transpose(-2, -1))  # (B, h, n_q, d_k) before w_o
        used = heads @ torch.linalg.pinv(v)  # the weights each query gave each key
        residual = (heads - used @ v).abs().max()
    advice = f"Apply dropout (p={p}) to {ATTENTION_PLACE}.{IN_LAYER if in_layer else ''}"
    if float(residual) > 1e-6 * float(heads.abs().max()):
        fail(f"{where}: the output is not the value vectors weighted per key, so dropout acts "
             f"after the weights meet the values (on the values, on the merged heads or on the "
             f"output). {advice}")
    problem = dropout_problem(used, weights, p, required=False)
    if problem:
        fail(f"{where}: reading the attention weights back from the output, {problem}. {advice}")


def check_feed_forward_dropout(learner: nn.Module, reference: nn.Module,
                               rng: np.random.Generator, p: float, what: str, *,
                               in_layer: bool = False) -> None:
    """Dropout inside the feed-forward network acts on the hidden activations or nowhere.

    With ``d_ff < d_model`` the hidden activations can be read back from the output (through
    the pseudo-inverse of ``w_2``); they must be ``relu(w_1(x))``, or that with some values set
    to 0 and the others divided by 1 - p.

    Args:
        learner: the learner's network (or the one inside the learner's layer), in float64,
            holding ``reference``'s weights; called as ``learner(x)``.
        reference: the course's ``PositionwiseFeedForward`` with the same weights and
            ``d_ff < d_model``.
        in_layer: the network is a sub-layer of a layer that drops its output itself.
    """
    import torch

    d_ff, d_model = reference.w_1.weight.shape
    if d_ff >= d_model:
        raise ValueError(f"reading hidden activations back needs d_ff < d_model, got {d_ff} "
                         f"and {d_model}")
    x = random_tensor(rng, (4, 8, d_model))
    got = training_output(learner, (x,), _seed(rng), what)
    where = f"{what} in training mode on x {tuple(x.shape)}"
    with torch.no_grad():
        hidden = torch.relu(reference.w_1(x))
        used = (got - reference.w_2.bias) @ torch.linalg.pinv(reference.w_2.weight).T
        residual = (got - reference.w_2(used)).abs().max()
    advice = f"Apply dropout (p={p}) to {FEED_FORWARD_PLACE}.{IN_LAYER if in_layer else ''}"
    if float(residual) > 1e-6 * float(got.abs().max()):
        fail(f"{where}: the output is not w_2 applied to some hidden activations, so dropout "
             f"acts on the output of w_2 (or after it). {advice}")
    problem = dropout_problem(used, hidden, p, required=False)
    if problem:
        fail(f"{where}: reading the hidden activations back from the output, {problem}. "
             f"{advice}")


InnerCheck = Callable[..., None]


def inner_check(reference: nn.Module) -> tuple[InnerCheck, str] | None:
    """The reader of the dropout inside a sub-layer like ``reference`` and the place it
    accepts (for messages), or None for a sub-layer without an optional place (any dropout
    inside it is then misplaced). A new kind of sub-layer with an optional place (a GELU
    network, say) adds its reader here, with the signature of :func:`check_attention_dropout`."""
    from transformer_ref.model.attention import MultiHeadAttention
    from transformer_ref.model.sublayers import PositionwiseFeedForward

    if isinstance(reference, MultiHeadAttention):
        return check_attention_dropout, ATTENTION_PLACE
    if isinstance(reference, PositionwiseFeedForward):
        return check_feed_forward_dropout, FEED_FORWARD_PLACE
    return None


# ----------------------------------------------------------------------------- whole modules


def check_dropout_placement(
    ctx: CheckContext, pair: ModulePair, inputs: Sequence[Any], p: float, what: str, *,
    optional: Sequence[Sequence[str]], own: Callable[[], None], rule: str,
) -> None:
    """The dropout of a module built of sub-layers (a layer, a model), in training mode.

    1. Something must be dropped: an output equal to the eval-mode one fails with ``rule``.
    2. An output equal to the reference's under the same seed, with each group of
       ``optional`` sub-modules dropping inside or not, is an accepted placement: it passes.
       (This also accepts the output's dropout held inside a sub-layer module, as minGPT's
       attention holds its ``resid_dropout``.)
    3. Otherwise ``own`` judges the dropout the module must apply itself, with the optional
       sub-modules in eval mode, and each optional sub-module is judged alone (with only it in
       training mode): it may drop nothing, or drop where :func:`inner_check` accepts. Both
       holding, the placement is right and the learner's masks are drawn in an order of its
       own: it passes.

    Args:
        pair: the reference and the learner's module, float64, eval mode, equal weights, both
            built with dropout ``p``. Its optional sub-modules need the readers' sizes
            (attention heads of width >= 3, ``d_ff < d_model``).
        inputs: ``forward``'s arguments.
        optional: groups of sub-module paths (e.g. ``[["self_attn"], ["feed_forward"]]``, or
            every attention module of a model as one group) that may drop inside.
        own: fails when the module's own dropout is misplaced (it runs with ``optional`` in
            eval mode, e.g. :func:`autograder.exercises.layer_variants.check_residual_dropout`).
        rule: the required places and how to apply dropout there, for the messages.
    """
    import torch

    learner, reference = pair.learner, pair.reference
    seed = _seed(ctx.rng)
    got = training_output(learner, inputs, seed, what)
    with torch.no_grad():
        calm = expect_tensor(call_torch(learner, *inputs), f"output of {what}")
    if got.shape == calm.shape and torch.equal(got, calm):
        fail(f"{what}: in training mode, with dropout={p}, the output equals the eval-mode "
             f"output: no dropout acts anywhere. {rule}")
    for switches in itertools.product((True, False), repeat=len(optional)):
        frozen = [path for group, on in zip(optional, switches, strict=True) if not on
                  for path in group]
        if agrees(got, reference_training_output(reference, inputs, seed, frozen)):
            return
    own()
    for path in (path for group in optional for path in group):
        _check_inside(ctx, pair, inputs, path, p, what, calm)


def _check_inside(ctx: CheckContext, pair: ModulePair, inputs: Sequence[Any], path: str,
                  p: float, what: str, calm: Tensor) -> None:
    """The sub-module at ``path`` drops nothing inside, or drops where its reader accepts."""
    import torch

    seed = _seed(ctx.rng)
    got = training_output(pair.learner, inputs, seed, what, only=[path])
    if got.shape == calm.shape and torch.equal(got, calm):
        return
    reference = pair.reference.get_submodule(path)
    if agrees(got, reference_training_output(pair.reference, inputs, seed, only=[path])):
        return
    found = inner_check(reference)
    where = f"{what}: with only {path} in training mode, the output"
    if found is None:
        fail(f"{where} changes, but {path} has no place for dropout inside: apply dropout in "
             f"the layer, to {path}'s output.")
    reader, place = found
    try:
        reader(pair.learner.get_submodule(path), reference, ctx.rng, p,
               f"{path} of {what}", in_layer=True)
    except CheckFailure as exc:
        if isinstance(exc.__cause__, TypeError):  # its forward takes other arguments
            fail(f"{where} is none that dropout inside {path} at an accepted place gives. "
                 f"Apply dropout (p={p}) there to {place}.{IN_LAYER}")
        raise



def optional_sublayers(reference: nn.Module) -> list[list[str]]:
    """The paths of every attention module and of every feed-forward network of a model: two
    groups of places where dropout is accepted, not required."""
    from transformer_ref.model.attention import MultiHeadAttention
    from transformer_ref.model.sublayers import PositionwiseFeedForward

    modules = list(reference.named_modules())
    return [[name for name, m in modules if isinstance(m, kind)]
            for kind in (MultiHeadAttention, PositionwiseFeedForward)]


def check_model_dropout(
    ctx: CheckContext, pair: ModulePair, inputs: Sequence[Any], p: float, what: str, *,
    hints: Callable[[Callable[..., Tensor], Callable[..., Tensor]], list[Hint]], rule: str,
    layers: Sequence[str] = (),
) -> None:
    """The dropout of a whole model: :func:`check_dropout_placement` with every attention
    module as one optional group and every feed-forward network as another. The model's own
    places (embeddings plus positions, every layer's sub-layer outputs) are judged with all of
    those in eval mode: the logits under one seed equal the reference's, or, for a model built
    of layers of the learner's own (``layers``), whose masks may be drawn in another order or
    layout, :func:`_layers_alone` holds.

    Args:
        pair: built with dropout ``p`` and sizes the readers need (see
            :func:`check_dropout_placement`).
        hints: builds the hints that name a misplaced dropout from two functions of module
            paths, each giving the reference's logits under the learner's seed: ``without``,
            with the dropout modules at the paths in eval mode as well (a missing place), and
            ``again``, with the modules at the paths (each with a ``dropout``) dropping their
            output once more (dropout twice).
        rule: the required places, for the messages.
        layers: the paths of the model's layers, when the learner may build them itself.
    """
    groups = optional_sublayers(pair.reference)
    inner = [path for group in groups for path in group]

    def own() -> None:
        try:
            _model_own_dropout(ctx, pair, inputs, inner, what, hints)
        except CheckFailure:
            if not layers or not _layers_alone(ctx, pair, inputs, inner, layers, what):
                raise

    check_dropout_placement(ctx, pair, inputs, p, what, optional=groups, own=own, rule=rule)


def _model_own_dropout(ctx: CheckContext, pair: ModulePair, inputs: Sequence[Any],
                       inner: Sequence[str], what: str,
                       hints: Callable[[Callable[..., Tensor], Callable[..., Tensor]],
                                       list[Hint]]) -> None:
    """With the modules at ``inner`` in eval mode, the logits under one seed equal the
    reference's (see :func:`check_model_dropout` for ``hints``)."""
    seed = _seed(ctx.rng)
    got = training_output(pair.learner, inputs, seed, what, frozen=inner)

    def without(*paths: str) -> Tensor:
        return reference_training_output(pair.reference, inputs, seed, [*inner, *paths])

    def again(*paths: str) -> Tensor:
        handles = [pair.reference.get_submodule(path).register_forward_hook(
            lambda module, _, output: module.dropout(output)) for path in paths]
        try:
            return without()
        finally:
            for handle in handles:
                handle.remove()

    compare_tensors(got, without(),
                    f"{what}: logits in training mode with every attention and feed-forward "
                    f"module in eval mode (so only the dropout on the embeddings plus positions "
                    f"and on the sub-layer outputs acts) and the same random seed as the "
                    f"reference", hints=hints(without, again))


def _layers_alone(ctx: CheckContext, pair: ModulePair, inputs: Sequence[Any],
                  inner: Sequence[str], layers: Sequence[str], what: str) -> bool:
    """The model's dropout judged apart from its layers' masks: with every layer in eval mode
    the logits under one seed equal the reference's (the model's own dropout outside the
    layers is the reference's), and each layer alone in training mode, its sub-layers in eval
    mode, changes the logits (it drops its sub-layers' outputs; where it drops them is for the
    layer's own exercise to judge)."""
    import torch

    seed = _seed(ctx.rng)
    got = training_output(pair.learner, inputs, seed, what, frozen=layers)
    if not agrees(got, reference_training_output(pair.reference, inputs, seed, layers)):
        return False
    with torch.no_grad():
        calm = expect_tensor(call_torch(pair.learner, *inputs), f"output of {what}")
    for layer in layers:
        below = [path for path in inner if path.startswith(f"{layer}.")]
        got = training_output(pair.learner, inputs, _seed(ctx.rng), what, frozen=below,
                              only=[layer])
        if torch.equal(got, calm):
            return False
    return True
