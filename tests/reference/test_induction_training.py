"""The attention-only model and the induction task: the data, the split losses, the training
loop, and the shipped model, whose second layer holds an induction head."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_ref.induction import prefix_matching_score
from transformer_ref.model.attention_only import AttentionOnlyModel
from transformer_ref.training.induction_training import (
    InductionConfig,
    half_losses,
    load_induction_model,
    repeated_tokens,
    train_induction,
)


def test_repeated_tokens_repeat_their_first_half() -> None:
    ids = repeated_tokens(5, 7, 11, torch.Generator().manual_seed(0))
    assert ids.shape == (5, 14) and int(ids.max()) < 11
    assert torch.equal(ids[:, :7], ids[:, 7:])


def test_half_losses_split_the_targets_at_the_repeat() -> None:
    """A model that knows the answer of the repeated half only: loss 0 there, log(V) on the
    first half (uniform logits)."""
    half, vocab = 4, 6
    ids = repeated_tokens(3, half, vocab, torch.Generator().manual_seed(1))

    def oracle(x: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, V)
        logits = torch.zeros(*x.shape, vocab)
        rows = torch.arange(half, x.size(1))  # row j predicts position j + 1 = j + 1 - half
        logits[:, rows] = 1e4 * torch.nn.functional.one_hot(ids[:, rows + 1 - half], vocab)
        return logits

    first, repeated = half_losses(oracle, ids)
    assert first.item() == pytest.approx(math.log(vocab))
    assert repeated.item() == pytest.approx(0.0)


def test_patterns_are_causal_rows_of_probabilities() -> None:
    model = AttentionOnlyModel(10, N=2, d_model=16, h=2, max_len=8)
    patterns = model.patterns(torch.randint(0, 10, (3, 8)))
    assert patterns.shape == (2, 3, 2, 8, 8)
    torch.testing.assert_close(patterns.sum(-1), torch.ones(2, 3, 2, 8))
    assert (patterns.triu(1) == 0).all()


def test_training_reports_both_halves_and_lowers_the_loss() -> None:
    torch.manual_seed(0)
    model = AttentionOnlyModel(8, N=2, d_model=16, h=2, max_len=16)
    config = InductionConfig(steps=20, vocab=8, half=4, batch=8, lr=3e-3, eval_every=10,
                             eval_batch=16)
    reports = train_induction(model, config)
    assert [r["step"] for r in reports] == [10, 20] and not model.training
    assert reports[-1]["first_half_loss"] < reports[0]["first_half_loss"] + 0.5
    assert reports[-1]["repeated_half_loss"] < math.log(8) + 1


def test_the_shipped_model_has_an_induction_head_in_its_second_layer() -> None:
    model, config, checkpoint = load_induction_model()
    ids = repeated_tokens(16, config.half, config.vocab, torch.Generator().manual_seed(1))
    scores = prefix_matching_score(model.patterns(ids).mean(dim=1), config.half)
    assert scores[1].max() > 0.5 > scores[0].max()
    with torch.no_grad():
        first, repeated = half_losses(model, ids)
    assert repeated < 1.0 < first
    assert checkpoint["metrics"]["below_one_nat"] is not None
