"""Checks of chapter 10: beam search with a length penalty, translating in padded batches, and
byte-pair encoding (learning merges, encoding with them).

The learner's ``beam_search(model, src, src_mask, max_len, beam_size, length_penalty, bos_id,
eos_id)`` must return exactly the hypotheses of :func:`transformer_ref.decoding.beam_search`:
every hypothesis proposes every next token, the ``beam_size`` candidates per sentence with the
best normalised score ``log P / ((5 + length) / 6) ** alpha`` survive, a hypothesis that emitted
EOS keeps its score and length and still competes for a place, and decoding stops once every
hypothesis of every sentence has ended or ``max_len`` tokens were generated.

First come designed cases (:data:`DESIGNS`): table models
(:class:`~autograder.exercises.models.TableModel`) whose trees separate each known bug of
:mod:`autograder.exercises.beam_variants` from the rules whatever the secret (only the token ids
are drawn), and whose outputs together name the bug in the hint. Then random cases: small
random encoder-decoders (float64, eval mode) drawn from ``ctx.rng``, with a bias on the EOS
logit so that hypotheses end at different lengths, drawn until the expected result differs
from greedy decoding and from ranking without the length penalty. Two hypotheses whose
normalised scores agree to 1e-4 count as a tie (the reference scores in float32, a learner may
score in float64), so a different tie-break is never a failure.

The learner's ``translate_batched(model, sources, max_len, batch_size, pad_id, decoder)`` must
return, in the order of the sources, what greedy decoding gives for each sentence on its own:
a correct mask makes a translation independent of its batch. The sources have very different
lengths and come unsorted; the cases are drawn until a missing mask and outputs left in the
order of the lengths would both be caught.

torch is imported inside the functions, so importing this module stays torch-free.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from autograder.exercises.beam_variants import BUGS, Bug, Switches, beam_variant
from autograder.exercises.checking import CheckContext, call, fail
from autograder.exercises.registry import register
from autograder.exercises.torch_checking import (
    call_torch,
    describe_tensor,
    graded_model_class,
    one_thread,
    randomize_parameters,
)

if TYPE_CHECKING:
    from torch import Tensor, nn

BEAM_SEARCH = "ch10.beam_search"
SCORE_TIE = 1e-4  # normalised scores closer than this are a tie (float32 reference scores)
DRAWS = 20  # attempts to find cases that separate the known bugs
MIN_CASES = 4  # cases where beam search and greedy decoding disagree


# The course's building blocks the chapter's setup cell gives the learner's code; while an
# exercise of this chapter is graded, its process holds these and nothing else of the course.
BUILDING_BLOCKS = (
    "transformer_ref.generation.greedy:greedy_decode",
    "transformer_ref.model.basic_masks:make_src_mask",
    "transformer_ref.model.basic_masks:subsequent_mask",
    "transformer_ref.model.targets:make_tgt_mask",
    "transformer_ref.model.targets:shift_right",
    "transformer_ref.model.make_model:make_model",
    "transformer_ref.data.vocab",
)


def _describe_model(config: dict[str, Any]) -> str:
    return f"<model N={config['N']} d_model={config['d_model']} vocab={config['tgt_vocab']}>"


def _graded_model_class() -> type:
    """``GradedEncoderDecoder``: an ``EncoderDecoder`` with a short repr, equality by weights,
    and a recipe that rebuilds it with make_model in the learner's process (see
    :func:`~autograder.exercises.torch_checking.graded_model_class`)."""
    from transformer_ref.modules import EncoderDecoder

    return graded_model_class(EncoderDecoder, "transformer_ref.model.make_model:make_model",
                              _describe_model)


def _random_model(rng: np.random.Generator, vocab: int, eos_id: int, eos_bias: float) -> nn.Module:
    """A random float64 encoder-decoder in eval mode whose EOS logit is shifted by ``eos_bias``.

    The output layer is scaled up so that the next-token distributions are peaked enough for
    beam search and greedy decoding to disagree now and then, as they do on a trained model.
    """
    import torch

    from transformer_ref.modules import make_model

    h = 2
    d_model = h * int(rng.integers(3, 6))
    config = dict(N=int(rng.integers(1, 3)), d_model=d_model, d_ff=2 * d_model, h=h,
                  dropout=0.0, max_len=40)
    with torch.random.fork_rng(devices=[]):  # leave the learner's random stream alone
        model = make_model(vocab, vocab, **config)
    randomize_parameters(model, rng)
    model.__class__ = _graded_model_class()
    model.double().eval()
    with torch.no_grad():
        model.generator.proj.weight.mul_(float(rng.uniform(1.0, 2.0)))
        model.generator.proj.bias[eos_id] += eos_bias
    return model


def _sources(rng: np.random.Generator, batch: int, vocab: int, eos_id: int) -> tuple[Tensor, ...]:
    """``(src, src_mask)``: random ids ending with ``eos_id``, padded (id 0) to a common length."""
    import torch

    from transformer_ref.masks import make_src_mask

    lengths = rng.integers(2, 7, size=batch)
    lengths[0] = lengths.max()
    src = rng.integers(4, vocab, size=(batch, int(lengths.max())))
    for b, n in enumerate(lengths):
        src[b, n - 1] = eos_id
        src[b, n:] = 0
    src = torch.from_numpy(src).long()
    return src, make_src_mask(src)


class _Case:
    """One call of beam search: its arguments, the expected result and known-bug results."""

    def __init__(self, reference: Callable[..., Any], model: nn.Module, src: Tensor,
                 src_mask: Tensor, max_len: int, **kwargs: Any) -> None:
        self.model, self.src, self.src_mask, self.max_len = model, src, src_mask, max_len
        self.kwargs = kwargs
        self.alpha = float(kwargs.get("length_penalty", 0.6))
        if kwargs.get("beam_size") == 1:  # beam search of width 1 is greedy decoding
            from transformer_ref.decoding import greedy_decode

            ids = {k: v for k, v in kwargs.items() if k in ("bos_id", "eos_id")}
            self.expected = greedy_decode(model, src, src_mask, max_len, **ids)
        else:
            self.expected = reference(model, src, src_mask, max_len, **kwargs)
        # What ignoring custom start and end ids gives: the defaults' hypotheses.
        defaults = {k: v for k, v in kwargs.items() if k not in ("bos_id", "eos_id")}
        self.with_default_ids = (reference(model, src, src_mask, max_len, **defaults)
                                 if defaults != kwargs and kwargs.get("beam_size") != 1 else None)
        self.unnormalised: list[list[int]] | None = None
        self.greedy: list[list[int]] | None = None
        self._reference = reference
        self._bugs: dict[str, list[list[int]]] = {}

    def add_bug_results(self) -> None:
        """Compute what ranking without the penalty and greedy decoding give."""
        from transformer_ref.decoding import greedy_decode

        args = (self.model, self.src, self.src_mask, self.max_len)
        plain = {k: v for k, v in self.kwargs.items() if k != "length_penalty"}
        self.unnormalised = self._reference(*args, **plain, length_penalty=0.0)
        ids = {k: v for k, v in self.kwargs.items() if k in ("bos_id", "eos_id")}
        self.greedy = greedy_decode(*args, **ids)

    def bug_result(self, bug: Bug) -> list[list[int]]:
        """What beam search with ``bug`` gives on this case (computed once)."""
        if bug.name not in self._bugs:
            self._bugs[bug.name] = beam_variant(self.model, self.src, self.src_mask,
                                                self.max_len, **self.kwargs,
                                                switches=bug.switches)
        return self._bugs[bug.name]

    def describe(self, name: str) -> str:
        shown = [repr(self.model), describe_tensor(self.src), describe_tensor(self.src_mask),
                 f"max_len={self.max_len}"] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{name}({', '.join(shown)})"


def _id_lists(got: Any, batch: int, what: str) -> list[list[int]]:
    """The learner's result as ``batch`` lists of Python ints (tensor rows are accepted)."""
    import torch

    if not isinstance(got, (list, tuple)):
        fail(f"{what} returned {describe_tensor(got)}, expected a list of {batch} lists of "
             f"token ids (one per source sentence).")
    if len(got) != batch:
        fail(f"{what} returned {len(got)} hypotheses for {batch} source sentences; return "
             f"exactly one list of ids per sentence, in the order of the batch.")
    rows = []
    for b, row in enumerate(got):
        if isinstance(row, torch.Tensor) and row.dim() == 1 and not row.is_floating_point():
            row = row.tolist()
        ok = isinstance(row, (list, tuple)) and all(
            isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in row)
        if not ok:
            fail(f"{what}: item {b} is {describe_tensor(row)}, expected a list of ints "
                 f"(use .tolist() on a tensor row).")
        rows.append([int(t) for t in row])
    return rows


def _normalised_score(case: _Case, b: int, hyp: Sequence[int]) -> float:
    """``log P(hyp) / lp(length)`` of one output, scored the way beam search ranks it."""
    import torch

    from transformer_ref.data.vocab import BOS_ID, EOS_ID
    from transformer_ref.decoding import length_penalty_factor, sequence_log_probs

    eos_id = case.kwargs.get("eos_id", EOS_ID)
    # An output shorter than max_len ended with an EOS that the cut removed.
    ids = list(hyp) + [eos_id] if len(hyp) < case.max_len else list(hyp)
    tgt = torch.tensor([ids], dtype=torch.long)
    log_p = sequence_log_probs(case.model, case.src[b : b + 1], case.src_mask[b : b + 1], tgt,
                               case.kwargs.get("bos_id", BOS_ID), eos_id)
    return float(log_p) / float(length_penalty_factor(torch.tensor(len(ids)), case.alpha))


GREEDY_HINT = ("this is the greedy result: keep beam_size hypotheses per sentence and choose "
               "the best beam_size of all beam_size * vocab candidates at every step.")
RULES = ("all beam_size * vocab candidates of a sentence compete together at each step, "
         "ranked by log P / ((5 + length) / 6) ** alpha; a hypothesis that emitted EOS keeps its "
         "score and length (it is not extended) but stays in the beam; decoding stops when "
         "every hypothesis has ended or max_len tokens were generated; the best normalised "
         "score wins.")


def _hint(case: _Case, got: list[list[int]]) -> str:
    """A sentence that names the known bug ``got`` shows on a random case, or the rules."""
    if all(len(e) == case.max_len and len(g) == case.max_len - 1
           for e, g in zip(case.expected, got, strict=True)):
        return (f"EOS never wins here, so every output should have max_len={case.max_len} "
                f"tokens; yours stop one step early. Run up to max_len decoding steps.")
    if case.alpha != 0.0 and got == case.unnormalised:
        return next(bug.hint for bug in BUGS if bug.switches == Switches(penalty="none"))
    if case.kwargs.get("beam_size", 4) > 1 and got == case.greedy:
        return GREEDY_HINT
    return RULES


def _designed_hint(cases: Sequence[_Case], outputs: Sequence[list[list[int]]]) -> str:
    """The hint of the known bug that gives the learner's outputs on every designed case (each
    case separates some bugs from the rules), or the rules."""
    from transformer_ref.decoding import greedy_decode

    for bug in BUGS:
        if all(case.bug_result(bug) == got for case, got in zip(cases, outputs, strict=True)):
            return bug.hint
    if all(greedy_decode(case.model, case.src, case.src_mask, case.max_len) == got
           for case, got in zip(cases, outputs, strict=True)):
        return GREEDY_HINT
    return RULES


def _decode(fn: Callable[..., Any], case: _Case) -> list[list[int]]:
    """The learner's hypotheses on ``case``, checked for their form (and for the default
    start and end ids where the case passes others)."""
    from transformer_ref.data.vocab import BOS_ID, EOS_ID

    what = case.describe(getattr(fn, "__name__", "beam_search"))
    got = call_torch(fn, case.model, case.src, case.src_mask, case.max_len, **case.kwargs)
    got = _id_lists(got, case.src.size(0), what)
    if case.with_default_ids is not None and got == case.with_default_ids != case.expected:
        fail(f"{what}: these are the hypotheses of the default start and end ids "
             f"({BOS_ID} and {EOS_ID}): start from bos_id and stop at eos_id, the arguments.")
    eos_id = case.kwargs.get("eos_id", EOS_ID)
    for b, hyp in enumerate(got):
        if eos_id in hyp:
            fail(f"{what}: hypothesis {b} contains the end token {eos_id}: {hyp}. Cut every "
                 f"output before its first EOS (and leave out the start token).")
        if len(hyp) > case.max_len:
            fail(f"{what}: hypothesis {b} has {len(hyp)} tokens, more than max_len="
                 f"{case.max_len}. Generate at most max_len tokens per sentence (EOS included).")
    return got


def _compare(fn: Callable[..., Any], case: _Case, got: list[list[int]],
             hint: Callable[[], str]) -> None:
    """Compare the learner's hypotheses ``got`` with the expected ones; ``hint`` names the
    likely bug when they differ."""
    what = case.describe(getattr(fn, "__name__", "beam_search"))
    for b, (hyp, expected) in enumerate(zip(got, case.expected, strict=True)):
        if hyp == expected:
            continue
        got_score, expected_score = _normalised_score(case, b, hyp), \
            _normalised_score(case, b, expected)
        if abs(got_score - expected_score) <= SCORE_TIE:
            continue  # an exact tie, broken differently
        fail(f"{what}: sentence {b}: expected {expected} (normalised score "
             f"{expected_score:.4f}), got {hyp} (score {got_score:.4f}). Hint: {hint()}")


def _run(ctx: CheckContext, fn: Callable[..., Any], case: _Case) -> None:
    """Call the learner on a random ``case`` and compare with the expected hypotheses."""
    got = _decode(fn, case)
    _compare(fn, case, got, lambda: _hint(case, got))


@dataclass(frozen=True)
class Design:
    """A designed sentence: ``tree`` maps a generated prefix (symbols separated by spaces) to
    the log-probabilities of the next symbols (``"EOS"`` ends); see
    :class:`~autograder.exercises.models.TableModel`."""

    what: str
    beam_size: int
    alpha: float
    max_len: int
    tree: dict[str, dict[str, float]]


SURE = -1e-4  # the log-probability of a token that is all but certain
# Each design separates some of the known bugs (beam_variants.BUGS) from the rules, whatever
# the token ids (tests/demo/test_beam_designs.py proves which bugs each one catches).
DESIGNS = (
    Design("a hypothesis that ends first against a longer one that the length penalty "
           "prefers in the end", beam_size=2, alpha=1.0, max_len=5,
           tree={"": {"EOS": -0.70, "a": -0.80}, "a": {"b": SURE}, "a b": {"EOS": SURE}}),
    Design("a finished hypothesis with the better raw score but the worse normalised one, and "
           "an unfinished hypothesis at max_len", beam_size=2, alpha=1.0, max_len=6,
           tree={"": {"a": -0.5, "EOS": -1.0}, "a": {"b": SURE}, "a b": {"c": SURE},
                 "a b c": {"x": -0.69, "y": -0.70}, "a b c x": {"u": -0.30, "EOS": -1.5},
                 "a b c x u": {"v": -0.15, "EOS": -2.0}, "a b c y": {"EOS": SURE}}),
    Design("a short ending that GNMT's penalty prefers and length ** alpha does not",
           beam_size=2, alpha=1.0, max_len=4,
           tree={"": {"EOS": -0.5, "a": -1.2}, "a": {"b": SURE}, "a b": {"EOS": SURE}}),
    Design("two continuations of one hypothesis that beat the other hypothesis' best",
           beam_size=2, alpha=0.6, max_len=4,
           tree={"": {"a": -0.6, "b": -0.8}, "a": {"c": -0.69, "d": -0.72},
                 "b": {"e": -1.5}, "a c": {"EOS": -0.3}, "a d": {"EOS": SURE},
                 "b e": {"EOS": SURE}}),
    Design("a finished long hypothesis with the better normalised score and a short one with "
           "the better raw score", beam_size=2, alpha=1.0, max_len=5,
           tree={"": {"a": -0.5, "EOS": -1.0}, "a": {"b": SURE},
                 "a b": {"EOS": -0.6, "c": -0.9}}),
    Design("a finished hypothesis that beats an unfinished one at max_len", beam_size=2,
           alpha=1.0, max_len=2,
           tree={"": {"a": -0.2, "EOS": -1.9}, "a": {"EOS": -0.6, "b": -0.9}}),
    Design("an early ending and a longer one that overtakes it, while a poor hypothesis "
           "ends too", beam_size=2, alpha=0.0, max_len=4,
           tree={"": {"EOS": -1.0, "a": -0.6}, "a": {"b": -0.1}, "a b": {"EOS": -0.05}}),
    Design("a hypothesis that ended, whose continuations after EOS would cost it the lead",
           beam_size=2, alpha=0.0, max_len=3,
           tree={"": {"EOS": -0.4, "a": -1.2}, "EOS": {"x": -2.0, "EOS": -2.0},
                 "a": {"b": SURE}, "a b": {"EOS": SURE}}),
)
DESIGN_VOCAB = 16


def _designed_case(ctx: CheckContext, design: Design) -> _Case:
    """Two sentences that follow ``design``, each with its own random token ids."""
    import torch

    from autograder.exercises.models import TableModel
    from transformer_ref.data.vocab import BOS_ID, EOS_ID
    from transformer_ref.masks import make_src_mask

    rng = ctx.rng
    ordinary = np.arange(4, DESIGN_VOCAB)
    symbols = sorted({s for prefix, after in design.tree.items()
                      for s in [*prefix.split(), *after] if s != "EOS"})
    sentences = [int(s) for s in rng.choice(ordinary, size=2, replace=False)]
    entries = []
    for sentence in sentences:
        ids = dict(zip(symbols, (int(t) for t in rng.choice(ordinary, size=len(symbols),
                                                            replace=False)), strict=True))
        ids["EOS"] = EOS_ID
        entries += [[sentence, [ids[s] for s in prefix.split()], ids[symbol], log_prob]
                    for prefix, after in design.tree.items()
                    for symbol, log_prob in after.items()]
    src = torch.from_numpy(rng.integers(4, DESIGN_VOCAB, size=(2, 4))).long()
    src[:, 0] = torch.tensor(sentences)
    src[:, -1] = EOS_ID
    model = TableModel(DESIGN_VOCAB, entries, BOS_ID, EOS_ID)
    return _Case(ctx.reference, model, src, make_src_mask(src), design.max_len,
                 beam_size=design.beam_size, length_penalty=design.alpha)


def _discriminating_cases(ctx: CheckContext, vocab: int, batch: int) -> list[_Case]:
    """At least ``MIN_CASES`` random cases whose expected results differ from greedy decoding
    and that, together, separate them from ranking without the length penalty (as far as
    ``DRAWS`` attempts find such cases)."""
    rng = ctx.rng
    cases: list[_Case] = []
    missing = {"unnormalised", "greedy"}
    for _ in range(DRAWS):
        model = _random_model(rng, vocab, eos_id=2, eos_bias=float(rng.uniform(-1.0, 1.0)))
        src, src_mask = _sources(rng, batch, vocab, eos_id=2)
        case = _Case(ctx.reference, model, src, src_mask, int(rng.integers(6, 10)),
                     beam_size=int(rng.integers(2, 5)),
                     length_penalty=round(float(rng.uniform(1.0, 2.0)), 2))
        case.add_bug_results()
        separated = {name for name in missing if getattr(case, name) != case.expected}
        # Any case where the beam beats greedy decoding also tests the ranking across beams.
        if separated or case.greedy != case.expected:
            cases.append(case)
            missing -= separated
        if not missing and len(cases) >= MIN_CASES:
            break
    return cases


@register(
    "ch10.beam_search",
    title="Beam search with a length penalty",
    points=5,
    difficulty="hard",
    minutes=45,
    reference="transformer_ref.generation.beam:beam_search",
    allowed=BUILDING_BLOCKS,
    builders=("transformer_ref.model.make_model:make_model",
              "autograder.exercises.models:TableModel"),
)
def check_beam_search(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``beam_search(model, src, src_mask, max_len, beam_size=4, length_penalty=0.6,
    bos_id=BOS_ID, eos_id=EOS_ID)``: matches the reference on designed trees that separate the
    known bugs (early stop, survivors or answer by raw log P, unfinished answer, finished
    hypotheses extended, length ** alpha, no normalisation, per-hypothesis top-1); equals greedy
    decoding for ``beam_size=1``; matches the reference on random models; stops at ``max_len``
    exactly when EOS never wins; honours custom start and end ids."""
    with one_thread():
        _check_beam_search(ctx, fn)


def _check_beam_search(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    rng = ctx.rng
    # Designed cases first: together they tell the known bugs apart, so the hint is chosen
    # by all of the learner's outputs.
    designed = [_designed_case(ctx, design) for design in DESIGNS]
    outputs = [_decode(fn, case) for case in designed]
    for case, got in zip(designed, outputs, strict=True):
        _compare(fn, case, got, lambda: _designed_hint(designed, outputs))

    vocab = int(rng.integers(10, 15))

    # beam_size=1 is greedy decoding, whatever the penalty.
    model = _random_model(rng, vocab, eos_id=2, eos_bias=1.0)
    src, src_mask = _sources(rng, 3, vocab, eos_id=2)
    _run(ctx, fn, _Case(ctx.reference, model, src, src_mask, 8, beam_size=1,
                        length_penalty=round(float(rng.uniform(0.5, 1.5)), 2)))

    # Cases where beam search, the penalty and its formula matter.
    for case in _discriminating_cases(ctx, vocab, batch=8):
        _run(ctx, fn, case)

    # EOS never wins: every output has exactly max_len tokens.
    model = _random_model(rng, vocab, eos_id=2, eos_bias=-50.0)
    src, src_mask = _sources(rng, 2, vocab, eos_id=2)
    max_len = int(rng.integers(2, 6))
    _run(ctx, fn, _Case(ctx.reference, model, src, src_mask, max_len, beam_size=3,
                        length_penalty=0.6))

    # Other start and end ids, passed by keyword, on a model whose answers depend on them (a
    # random model may answer the same whatever it starts from: then draw another).
    for _ in range(20):
        bos_id, eos_id = (int(i) for i in rng.choice(np.arange(4, vocab), size=2, replace=False))
        model = _random_model(rng, vocab, eos_id=eos_id, eos_bias=float(rng.uniform(1.0, 2.0)))
        src, src_mask = _sources(rng, 3, vocab, eos_id=eos_id)
        case = _Case(ctx.reference, model, src, src_mask, 8, beam_size=3, length_penalty=0.6,
                     bos_id=bos_id, eos_id=eos_id)
        if case.with_default_ids != case.expected:
            break
    _run(ctx, fn, case)


# ----------------------------------------------------------------------------- batched translation

TRANSLATE_BATCHED = "ch10.translate_batched"


def _id_sources(rng: np.random.Generator, count: int, vocab: int, eos_id: int,
                pad_id: int) -> list[list[int]]:
    """``count`` sources of very different lengths (2 to 12 ids), shuffled, EOS last.

    No source contains ``pad_id``, and no two have the same length, so the order of the
    sources differs from their order by length.
    """
    symbols = np.array([i for i in range(4, vocab) if i not in (pad_id, eos_id)])
    lengths = rng.permutation(np.arange(2, 13))[:count]
    while bool(np.all(np.diff(lengths) > 0)):  # already sorted: the order would not matter
        lengths = rng.permutation(lengths)
    return [[int(t) for t in rng.choice(symbols, size=int(n) - 1)] + [eos_id] for n in lengths]


def _decode_batches(model: nn.Module, sources: list[list[int]], max_len: int, batch_size: int,
                    pad_id: int, mask_id: int | None) -> list[list[int]]:
    """Batches sorted by length as the reference cuts them, masking ``mask_id`` (None: no
    mask at all); the known bugs' results, for hints."""
    import torch

    from transformer_ref.data.batching import pad_sequences
    from transformer_ref.generation.greedy import greedy_decode

    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    outputs: list[list[int]] = [[] for _ in sources]
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        src = pad_sequences([sources[i] for i in chosen], pad_id)
        keep = torch.ones_like(src, dtype=torch.bool) if mask_id is None else src != mask_id
        for i, hyp in zip(chosen, greedy_decode(model, src, keep[:, None, None, :], max_len),
                          strict=True):
            outputs[i] = hyp
    return outputs


class _BatchCase:
    """One call of translate_batched: arguments, the expected outputs and known-bug outputs."""

    def __init__(self, reference: Callable[..., Any], model: nn.Module,
                 sources: list[list[int]], max_len: int, batch_size: int | None,
                 pad_id: int | None) -> None:
        from transformer_ref.data.vocab import PAD_ID

        self.model, self.sources, self.max_len = model, sources, max_len
        self.batch_size, self.pad_id = batch_size, pad_id
        pad = PAD_ID if pad_id is None else pad_id
        # Each sentence on its own: what every batching must give.
        self.expected = reference(model, sources, max_len, 1, pad)
        size = len(sources) if batch_size is None else batch_size
        self.by_length = [self.expected[i]
                          for i in sorted(range(len(sources)), key=lambda i: len(sources[i]))]
        self.unmasked = _decode_batches(model, sources, max_len, size, pad, None)
        self.zero_masked = _decode_batches(model, sources, max_len, size, pad, 0)

    def args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args: tuple[Any, ...] = (self.model, self.sources, self.max_len)
        if self.batch_size is not None:
            args += (self.batch_size,)
        return args, {} if self.pad_id is None else {"pad_id": self.pad_id}

    def describe(self) -> str:
        shown = [repr(self.model), f"sources (lengths {[len(s) for s in self.sources]})",
                 f"max_len={self.max_len}"]
        if self.batch_size is not None:
            shown.append(f"batch_size={self.batch_size}")
        if self.pad_id is not None:
            shown.append(f"pad_id={self.pad_id}")
        return f"translate_batched({', '.join(shown)})"


def _batch_hint(case: _BatchCase, got: list[list[int]]) -> str:
    """A sentence that names the known bug ``got`` shows, or general advice."""
    if got == case.by_length:
        return ("these are the right translations in the order of the source lengths; put "
                "each output back at the position of its source.")
    # With another pad_id, a mask for id 0 hides nothing: test that reading first.
    if case.pad_id not in (None, 0) and got == case.zero_masked:
        return (f"the mask hides id 0, but the padding here is pad_id={case.pad_id}: pad with "
                f"pad_id and build the mask with make_src_mask(src, pad_id).")
    if got == case.unmasked:
        return ("these are the translations without a source mask: the padding takes part in "
                "attention. Build the mask with make_src_mask(src, pad_id).")
    return ("pad each batch on the right with pad_id, mask exactly the padding, decode with "
            "decoder(model, src, src_mask, max_len), and return the outputs in the order of "
            "the sources.")


def _run_batched(fn: Callable[..., Any], case: _BatchCase) -> None:
    """Call the learner on ``case`` and compare with every sentence decoded alone."""
    what = case.describe()
    args, kwargs = case.args()
    got = call_torch(fn, *args, name="translate_batched", **kwargs)
    count = len(case.sources)
    if isinstance(got, (list, tuple)) and len(got) < count:
        fail(f"{what} returned {len(got)} outputs for {count} sources: every source needs one. "
             f"Was the last, smaller batch left out? range(0, len(order), batch_size) visits "
             f"every start.")
    rows = _id_lists(got, count, what)
    wrong = [b for b, (row, expected) in enumerate(zip(rows, case.expected, strict=True))
             if row != expected]
    if wrong:
        b = wrong[0]
        fail(f"{what}: {len(wrong)} of {count} outputs differ from the sentence translated on "
             f"its own; source {b} (length {len(case.sources[b])}): expected "
             f"{case.expected[b]}, got {rows[b]}. Hint: {_batch_hint(case, rows)}")


def _telling_case(ctx: CheckContext, vocab: int, batch_size: int | None,
                  pad_id: int | None) -> _BatchCase:
    """A case whose outputs change when they come back in the order of the lengths, and (for
    batches of more than one sentence) when the padding is not masked; drawn until one is
    found, at most ``DRAWS`` times, so that these bugs cannot pass by chance."""
    from transformer_ref.data.vocab import EOS_ID, PAD_ID

    rng = ctx.rng
    case = None
    for _ in range(DRAWS):
        model = _random_model(rng, vocab, eos_id=EOS_ID, eos_bias=float(rng.uniform(0.5, 2.0)))
        sources = _id_sources(rng, int(rng.integers(6, 9)), vocab, EOS_ID,
                              PAD_ID if pad_id is None else pad_id)
        case = _BatchCase(ctx.reference, model, sources, int(rng.integers(6, 10)), batch_size,
                          pad_id)
        padded = batch_size != 1
        if case.by_length != case.expected and (case.unmasked != case.expected or not padded):
            break
    return case


@register(
    TRANSLATE_BATCHED,
    title="Translating in padded batches",
    points=3,
    difficulty="medium",
    minutes=30,
    reference="transformer_ref.generation.batch_translation:translate_batched",
    allowed=(*BUILDING_BLOCKS, "transformer_ref.data.batching:pad_sequences"),
    builders=("transformer_ref.model.make_model:make_model",),
)
def check_translate_batched(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """``translate_batched(model, sources, max_len, batch_size=32, pad_id=PAD_ID,
    decoder=greedy_decode)`` returns, in the order of the sources, what greedy decoding gives
    for each sentence on its own: with batches of a few sentences, of one, of all of them (and
    the default size), and with a ``pad_id`` other than 0. The sources have very different
    lengths, and the cases are drawn so that unmasked padding changes the outputs."""
    with one_thread():
        rng = ctx.rng
        vocab = int(rng.integers(10, 15))
        _run_batched(fn, _telling_case(ctx, vocab, int(rng.integers(2, 4)), None))
        _run_batched(fn, _telling_case(ctx, vocab, 1, None))
        _run_batched(fn, _telling_case(ctx, vocab, 50, None))
        _run_batched(fn, _telling_case(ctx, vocab, None, None))
        other_pad = int(rng.integers(4, vocab - 1))
        _run_batched(fn, _telling_case(ctx, vocab, int(rng.integers(2, 4)), other_pad))


# --- byte-pair encoding ----------------------------------------------------------------------

LEARN_BPE = "ch10.learn_bpe"
BPE_ENCODE = "ch10.bpe_encode"
BPE_LETTERS = "aabbcdeeilnorst"  # repeated letters make frequent pairs and ties
TIE_RULE = ("ties are broken by the smallest pair in Python's order of (left, right) string "
            "tuples, e.g. min(counts, key=lambda pair: (-counts[pair], pair))")


def bpe_corpus(rng: np.random.Generator, n_texts: int) -> list[str]:
    """Random captions of short words over a small alphabet, with punctuation, repeated and
    irregular spaces, a newline and a non-ASCII letter, so that pairs repeat and tie."""
    words = ["".join(rng.choice(list(BPE_LETTERS), size=int(rng.integers(1, 6))))
             for _ in range(int(rng.integers(8, 16)))] + ["é", "ä.", "a,"]
    texts = []
    for _ in range(n_texts):
        chosen = rng.choice(words, size=int(rng.integers(1, 9)))
        gaps = rng.choice([" ", " ", " ", "  ", "\n"], size=len(chosen))
        texts.append("".join(g + w for g, w in zip(gaps, chosen, strict=True)).lstrip(" "))
    return texts


def pair_counts(texts: Sequence[str], merges: Sequence[tuple[str, str]]) -> dict[tuple, int]:
    """The pair counts learning sees after ``merges`` (for the messages)."""
    from transformer_ref.data.bpe import merge_pair
    from transformer_ref.data.words import split_words

    counts: dict[tuple, int] = {}
    for word in (w for text in texts for w in split_words(text)):
        symbols = list(word)
        for pair in merges:
            symbols = merge_pair(symbols, pair)
        for pair in zip(symbols, symbols[1:], strict=False):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def as_merges(got: Any, what: str) -> list[tuple[str, str]]:
    """The learner's merges as a list of ``(str, str)`` tuples, or a failure that says why."""
    if not isinstance(got, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(s, str) for s in p)
            for p in got):
        fail(f"{what} should return a list of (left, right) pairs of strings; got "
             f"{type(got).__name__} {str(got)[:80]}.")
    return [tuple(p) for p in got]


CROSSING_HINT = (" Hint: your pair has whitespace after a non-space character, so it joins two "
                 "words: count pairs inside each chunk of split_words only.")


def joins_words(pair: tuple[str, str]) -> bool:
    """Whether a merge joins two chunks: a symbol inside one is whitespace, then non-space."""
    return re.fullmatch(r"\s*\S*", "".join(pair)) is None


def compare_merges(got: list[tuple[str, str]], expected: list[tuple[str, str]],
                   texts: Sequence[str], what: str) -> None:
    """Fail at the first merge that differs, naming what the learner's loop did there."""
    for i, (mine, theirs) in enumerate(zip(got, expected, strict=False)):
        if mine == theirs:
            continue
        counts = pair_counts(texts, expected[:i])
        message = (f"{what}: merge {i} is {mine!r}, expected {theirs!r} (which occurs "
                   f"{counts.get(theirs, 0)} times at that step).")
        if joins_words(mine):
            message += CROSSING_HINT
        elif counts.get(mine, 0) == counts.get(theirs, 0):
            message += (f" Hint: your pair occurs {counts[theirs]} times too, a tie: {TIE_RULE}.")
        elif mine not in counts:
            message += (" Hint: your pair does not occur at that step: were the earlier merges "
                        "applied to every word, left to right?")
        fail(message)
    if len(got) != len(expected):
        crossing = any(joins_words(pair) for pair in got[len(expected):])
        fail(f"{what}: {len(got)} merges, expected {len(expected)} (stop after num_merges "
             f"merges, or earlier only when no word has two symbols left)."
             + (CROSSING_HINT if crossing else ""))


@register(
    LEARN_BPE,
    title="Learning byte-pair merges",
    points=3,
    difficulty="medium",
    minutes=30,
    reference="transformer_ref.data.bpe:learn_bpe",
    allowed=("transformer_ref.data.words:split_words",),
)
def check_learn_bpe(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Designed corpora (a tie, words whose boundary pair would win), then random corpora,
    compared merge by merge with the reference."""
    cases = [(["zz yy"], 1), (["x x x x x"], 3), (["low lower lowest", "newer wider"], 12)]
    cases += [(bpe_corpus(ctx.rng, int(ctx.rng.integers(10, 30))), int(ctx.rng.integers(15, 40)))
              for _ in range(3)]
    for texts, num_merges in cases:
        what = f"learn_bpe({texts if len(texts) < 3 else '<' + str(len(texts)) + ' texts>'}, " \
               f"num_merges={num_merges})"
        got = as_merges(call(fn, list(texts), num_merges), what)
        compare_merges(got, ctx.reference(texts, num_merges), texts, what)


@register(
    BPE_ENCODE,
    title="Encoding with byte-pair merges",
    points=2,
    difficulty="medium",
    minutes=20,
    reference="transformer_ref.data.bpe:bpe_encode",
    allowed=("transformer_ref.data.words:split_words",),
)
def check_bpe_encode(ctx: CheckContext, fn: Callable[..., Any]) -> None:
    """Texts (seen, unseen, empty, odd whitespace) under merges the reference learnt on a
    hidden corpus: the tokens join back to the text and equal the reference's."""
    from transformer_ref.data.bpe import learn_bpe

    corpus = bpe_corpus(ctx.rng, 30)
    merges = learn_bpe(corpus, int(ctx.rng.integers(20, 40)))
    fresh = bpe_corpus(ctx.rng, 4)
    texts = ["", "  ", corpus[0] + "  ", *fresh, "aaaa aaa", "über  ein\tHund."]
    merges += [("a", "a"), ("aa", "a")]  # overlapping pairs, merged left to right
    # Designed first: the order of the merges decides ("bc" before "ab"), and a merge that
    # would join two words if the text were not cut into words first.
    designed = [("b", "c"), ("a", "b"), ("a", " ")]
    cases = [("abc a b", designed), ("cabcab", designed)] + [(text, merges) for text in texts]
    for text, merges in cases:
        what = f"bpe_encode({text!r}, {merges if merges is designed else 'merges'})"
        got = call(fn, text, [tuple(m) for m in merges])
        if not isinstance(got, (list, tuple)) or not all(isinstance(t, str) for t in got):
            fail(f"{what} should return a list of token strings; got {str(got)[:80]}.")
        if "".join(got) != text:
            fail(f"{what}: decoding does not give the text back: ''.join(tokens) is "
                 f"{''.join(got)!r}. Every character must end up in exactly one token.")
        expected = ctx.reference(text, merges)
        if list(got) != expected:
            fail(f"{what} gave {list(got)}, expected {expected}. Hint: while some adjacent pair "
                 f"is a merge, merge the pair learnt earliest (the lowest index in merges), "
                 f"everywhere in the word, left to right; the order of merges is their "
                 f"priority.")
