"""The designed trees of the beam-search check tell every known bug from the rules and from
each other, whatever token ids the secret draws, so a bug fails and its hint names it."""

from __future__ import annotations

import importlib
from itertools import combinations

import numpy as np
import pytest

from autograder import get_exercise
from autograder.exercises.beam_variants import BUGS, beam_variant
from autograder.exercises.checking import CheckContext
from transformer_ref.decoding import greedy_decode

ch10 = importlib.import_module("autograder.exercises.checks.ch10")


def _cases(seed: int) -> list:
    context = CheckContext("ch10.beam_search", True, np.random.default_rng(seed),
                           get_exercise("ch10.beam_search").load_reference())
    return [ch10._designed_case(context, design) for design in ch10.DESIGNS]


@pytest.mark.parametrize("seed", range(3))
def test_designs_tell_every_known_bug_apart(seed: int):
    cases = _cases(seed)
    outputs = {"the rules": [case.expected for case in cases]}
    outputs.update({bug.name: [case.bug_result(bug) for case in cases] for bug in BUGS})
    outputs["greedy decoding"] = [greedy_decode(case.model, case.src, case.src_mask,
                                                case.max_len) for case in cases]
    # The switchable search follows the rules when no switch is on ...
    assert [beam_variant(case.model, case.src, case.src_mask, case.max_len, **case.kwargs)
            for case in cases] == outputs["the rules"]
    # ... and no two of the rules and the bugs give the same outputs on all the designs.
    same = [(a, b) for a, b in combinations(outputs, 2) if outputs[a] == outputs[b]]
    assert not same


def test_a_table_model_gives_the_designed_log_probabilities():
    case = _cases(0)[0]
    model, src = case.model, case.src
    memory = model.encode(src, case.src_mask)
    (sentence, _, token, log_prob) = model.entries[0]
    row = int((src[:, 0] == sentence).nonzero()[0, 0])
    ys = src.new_full((1, 1), 1)  # BOS alone: the empty prefix
    scores = model.generator(model.decode(ys, memory[row : row + 1], None, None)[:, -1])[0]
    assert scores.exp().sum().item() == pytest.approx(1.0)
    assert scores[token].item() == pytest.approx(log_prob)
    # Without a leading BOS the table is never reached: the sentence ends at once.
    other = model.generator(model.decode(ys + 3, memory[row : row + 1], None, None)[:, -1])[0]
    assert other.argmax().item() == model.eos_id
