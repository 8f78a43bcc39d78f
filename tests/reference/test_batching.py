"""Padding, masks and length-bucketed batches."""

import random

import pytest
import torch

from transformer_ref.data.batching import Batch, bucket_by_tokens, collate
from transformer_ref.data.vocab import BOS_ID, EOS_ID, PAD_ID


def test_collate_shapes_shift_and_masks():
    pairs = [([5, 6, 7, EOS_ID], [8, EOS_ID]), ([9, EOS_ID], [4, 5, 6, EOS_ID])]
    batch = collate(pairs)
    assert batch.src.tolist() == [[5, 6, 7, EOS_ID], [9, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.tgt_out.tolist() == [[8, EOS_ID, PAD_ID, PAD_ID], [4, 5, 6, EOS_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, EOS_ID, PAD_ID], [BOS_ID, 4, 5, 6]]
    assert batch.n_tokens == 6
    assert batch.src_mask.shape == (2, 1, 1, 4) and batch.src_mask.dtype == torch.bool
    assert batch.src_mask[1, 0, 0].tolist() == [True, True, False, False]
    assert batch.tgt_mask.shape == (2, 1, 4, 4)
    # Causal, and the padded decoder-input position of row 0 is hidden from every query.
    assert batch.tgt_mask[1, 0].tolist() == torch.ones(4, 4, dtype=torch.bool).tril().tolist()
    assert not batch.tgt_mask[0, 0, :, 3].any()


def test_batch_to_moves_every_tensor():
    batch = collate([([5, EOS_ID], [6, EOS_ID])]).to("cpu")
    assert isinstance(batch, Batch) and batch.n_tokens == 2
    assert all(t.device.type == "cpu" for t in (batch.src, batch.tgt_in, batch.tgt_mask))


def test_collate_rejects_empty_input():
    with pytest.raises(ValueError, match="at least one"):
        collate([])
    with pytest.raises(ValueError, match="EOS"):
        collate([([], [EOS_ID])])


@pytest.mark.parametrize("shuffle", [False, True])
def test_buckets_respect_budget_and_cover_every_index(shuffle):
    rng = random.Random(3)
    lengths = [rng.randint(1, 40) for _ in range(500)]
    batches = bucket_by_tokens(lengths, 200, shuffle=shuffle, seed=7)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(500))
    for b in batches:
        assert len(b) * max(lengths[i] for i in b) <= 200
    # Similar lengths go together: little padding, unlike batches in random order.
    padding = sum(len(b) * max(lengths[i] for i in b) - sum(lengths[i] for i in b) for b in batches)
    assert padding < 0.1 * sum(lengths)


def test_unsorted_batches_mix_lengths_within_budget():
    rng = random.Random(5)
    lengths = [rng.randint(1, 10) for _ in range(300)]
    batches = bucket_by_tokens(lengths, 50, shuffle=True, seed=1, sort_by_length=False)
    assert sorted(i for b in batches for i in b) == list(range(300))
    assert all(len(b) * max(lengths[i] for i in b) <= 50 for b in batches)
    assert sum(len({lengths[i] for i in b}) > 1 for b in batches) > len(batches) // 2


def test_shuffle_depends_on_seed_only():
    lengths = [5, 3, 5, 5, 2, 3, 5, 4] * 10
    a = bucket_by_tokens(lengths, 20, shuffle=True, seed=1)
    assert a == bucket_by_tokens(lengths, 20, shuffle=True, seed=1)
    assert a != bucket_by_tokens(lengths, 20, shuffle=True, seed=2)


def test_too_long_example_gets_its_own_batch():
    batches = bucket_by_tokens([3, 50, 4, 2], 10, shuffle=False)
    assert [1] in batches
    assert sorted(i for b in batches for i in b) == [0, 1, 2, 3]


def test_bad_budget():
    with pytest.raises(ValueError, match="max_tokens"):
        bucket_by_tokens([1, 2], 0, shuffle=False)
