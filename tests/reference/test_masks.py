"""Mask helpers and the decoder-input shift: forms, dtypes, shapes, bad input."""

import pytest
import torch

from transformer_ref.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_ref.masks import make_src_mask, make_tgt_mask, shift_right, subsequent_mask


def test_subsequent_mask_is_lower_triangular_bool():
    mask = subsequent_mask(4)
    assert mask.dtype == torch.bool
    assert mask.shape == (1, 4, 4)
    for i in range(4):
        for j in range(4):
            assert bool(mask[0, i, j]) == (j <= i)


def test_subsequent_mask_device_and_bad_size():
    assert subsequent_mask(3, device="cpu").device.type == "cpu"
    for bad in (0, -2, 2.0, True):
        with pytest.raises(ValueError, match="size"):
            subsequent_mask(bad)


def test_src_mask_marks_real_tokens():
    src = torch.tensor([[5, 6, EOS_ID, PAD_ID], [7, EOS_ID, PAD_ID, PAD_ID]])
    mask = make_src_mask(src)
    assert mask.dtype == torch.bool
    assert mask.shape == (2, 1, 1, 4)
    assert mask[:, 0, 0].tolist() == [[True, True, True, False], [True, True, False, False]]


def test_src_mask_custom_pad_id():
    src = torch.tensor([[0, 9, 9]])
    assert make_src_mask(src, pad_id=9)[0, 0, 0].tolist() == [True, False, False]


def test_tgt_mask_is_causal_and_hides_padding():
    tgt_in = torch.tensor([[BOS_ID, 5, 6, PAD_ID], [BOS_ID, 7, 8, 9]])
    mask = make_tgt_mask(tgt_in)
    assert mask.dtype == torch.bool
    assert mask.shape == (2, 1, 4, 4)
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    not_pad = tgt_in != PAD_ID
    expected = causal[None] & not_pad[:, None, :]
    assert torch.equal(mask[:, 0], expected)
    # No query row is left without any key (the BOS column is always visible).
    assert mask.any(dim=-1).all()


def test_masks_broadcast_against_attention_scores():
    src = torch.randint(1, 9, (3, 5))
    tgt_in = torch.randint(1, 9, (3, 4))
    scores_src = torch.zeros(3, 2, 4, 5)
    scores_tgt = torch.zeros(3, 2, 4, 4)
    assert (scores_src.masked_fill(~make_src_mask(src), 1)).shape == scores_src.shape
    assert (scores_tgt.masked_fill(~make_tgt_mask(tgt_in), 1)).shape == scores_tgt.shape


def test_shift_right_prepends_bos_and_drops_last():
    tgt = torch.tensor([[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]])
    shifted = shift_right(tgt)
    assert shifted.tolist() == [[BOS_ID, 5, 6, 7], [BOS_ID, 8, EOS_ID, PAD_ID]]
    assert shifted.dtype == tgt.dtype
    assert shifted.shape == tgt.shape
    assert shift_right(tgt, bos_id=42)[:, 0].tolist() == [42, 42]


@pytest.mark.parametrize("fn", [make_src_mask, make_tgt_mask, shift_right])
def test_bad_token_batches_are_rejected(fn):
    with pytest.raises(ValueError, match="batch"):
        fn(torch.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="integer"):
        fn(torch.ones(2, 3))
    with pytest.raises(TypeError, match="torch.Tensor"):
        fn([[1, 2, 3]])
