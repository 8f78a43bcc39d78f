"""The learned positional table: a drop-in for the sinusoidal module, trained, bounded."""

import pytest
import torch

from transformer_ref.model.learned_positional import LearnedPositionalEncoding
from transformer_ref.model.positional import PositionalEncoding


def test_same_interface_as_the_sinusoidal_module():
    learned = LearnedPositionalEncoding(16, dropout=0.0, max_len=32).eval()
    sinusoidal = PositionalEncoding(16, dropout=0.0, max_len=32).eval()
    x = torch.randn(3, 10, 16)
    assert learned(x).shape == sinusoidal(x).shape == x.shape
    # The table is what is added, position by position.
    torch.testing.assert_close(learned(x) - x, learned.pe.weight[:10].expand(3, -1, -1))


def test_the_table_is_trained_and_saved():
    module = LearnedPositionalEncoding(8, dropout=0.0, max_len=12)
    module(torch.randn(2, 5, 8)).sum().backward()
    grad = module.pe.weight.grad
    assert grad[:5].abs().sum() > 0 and grad[5:].abs().sum() == 0
    assert "pe.weight" in module.state_dict()


def test_an_offset_continues_the_positions():
    module = LearnedPositionalEncoding(8, dropout=0.0, max_len=12).eval()
    x = torch.randn(1, 6, 8)
    whole = module(x)
    torch.testing.assert_close(module(x[:, 4:], start=4), whole[:, 4:])


def test_positions_beyond_the_table_are_refused_with_the_fix():
    module = LearnedPositionalEncoding(8, max_len=4)
    with pytest.raises(ValueError, match="max_len >= 5"):
        module(torch.randn(1, 5, 8))
