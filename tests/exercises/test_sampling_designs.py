"""The designed distributions of the sampling check: a correct sampler passes them but for a
chance below 1e-12, each known bug it claims to catch fails it (whatever token ids the secret
draws), and the hint names that bug."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from transformer_ref.generation.sampling import filter_logits

ch11 = importlib.import_module("autograder.exercises.checks.ch11")
# A set of tokens with this much probability is drawn at least once in DRAWS draws but for a
# chance below 1e-12.
SURELY_DRAWN = 1 - 1e-12 ** (1 / ch11.DRAWS)


def _row(design, seed: int) -> torch.Tensor:
    """The design's logits at the token ids a secret would draw."""
    case = ch11._design_case(np.random.default_rng(seed), design)
    return case["table"][case["context"]]


def _bound(p: np.ndarray) -> float:
    return 0.5 * np.sqrt(p * (1 - p) / ch11.DRAWS).sum() + ch11.SLACK


def _separated(p: np.ndarray, q: np.ndarray) -> bool:
    """Whether draws from ``q`` fail the check for ``p`` but for a chance below 1e-12."""
    impossible = q[p == 0].sum() >= SURELY_DRAWN
    missing = bool(((p >= ch11.LIKELY) & (q == 0)).any())
    # The counts of q stay within SLACK + q's own spread of q; beyond p's bound from there.
    far = 0.5 * np.abs(p - q).sum() > _bound(p) + _bound(q)
    return impossible or missing or far


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("design", ch11.DESIGNS, ids=lambda d: d.what)
def test_the_rules_are_the_references_and_each_claimed_bug_is_caught(design, seed):
    row = _row(design, seed)
    settings = (design.temperature, design.top_k, design.top_p)
    p = ch11._filtered_probs(row, *settings).numpy()
    reference = filter_logits(row, *settings).softmax(-1).numpy()
    assert np.allclose(p, reference, atol=1e-12)
    for bug in design.catches:
        q = ch11._filtered_probs(row, *settings, bug).numpy()
        assert _separated(p, q), (design.what, bug)


@pytest.mark.parametrize("design", ch11.DESIGNS, ids=lambda d: d.what)
def test_the_hint_names_the_bug_that_drew_the_counts(design):
    row = _row(design, 0)
    settings = (design.temperature, design.top_k, design.top_p)
    for bug in design.catches:
        q = ch11._filtered_probs(row, *settings, bug).numpy()
        counts = np.round(q * ch11.DRAWS).astype(int)
        hint = ch11._sampling_hint(counts, design, row)
        same = [other for other in ch11.SAMPLING_BUGS
                if np.allclose(ch11._filtered_probs(row, *settings, other).numpy(), q)]
        assert hint in [ch11.SAMPLING_BUGS[b] for b in same], (design.what, bug)


def test_every_known_bug_is_caught_by_some_design():
    caught = {bug for design in ch11.DESIGNS for bug in design.catches}
    assert caught == set(ch11.SAMPLING_BUGS)


def test_a_correct_sampler_passes_and_the_bounds_are_not_loose():
    """Counts drawn from the right distribution pass; counts a bit further off do not."""
    design = ch11.DESIGNS[0]
    row = _row(design, 0)
    p = ch11._filtered_probs(row, design.temperature, None, None).numpy()
    rng = np.random.default_rng(0)
    for _ in range(50):
        counts = np.bincount(rng.choice(p.size, size=ch11.DRAWS, p=p), minlength=p.size)
        assert ch11._distribution_problem(counts, p) is None
    shifted = np.roll(p, 1) * 0.3 + p * 0.7
    counts = np.round(shifted * ch11.DRAWS).astype(int)
    assert "total variation" in ch11._distribution_problem(counts, p)
