"""Decoding with a key/value cache gives what re-running the decoder over the prefix gives."""

import functools

import pytest
import torch

from transformer_ref.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_ref.decoding import beam_search, greedy_decode
from transformer_ref.generation.cached_beam import cached_beam_search
from transformer_ref.generation.greedy import next_log_probs
from transformer_ref.generation.kv_cache import DecoderCache, cached_greedy_decode, can_cache
from transformer_ref.masks import make_src_mask
from transformer_ref.modules import make_model

VOCAB = 30


def model_and_source(seed: int, norm_first: bool, fast: bool = True):
    torch.manual_seed(seed)
    model = make_model(VOCAB, VOCAB, N=2, d_model=32, d_ff=64, h=4, dropout=0.3,
                       norm_first=norm_first, fast_attention=fast).eval()
    src = torch.randint(4, VOCAB, (6, 9))
    src[:, -1] = EOS_ID
    src[1, 5:] = PAD_ID  # shorter sentences in the batch: the cache must keep their mask
    src[1, 4] = EOS_ID
    src[4, 3:] = PAD_ID
    src[4, 2] = EOS_ID
    return model, src, make_src_mask(src)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("fast", [False, True])
def test_each_step_scores_like_the_whole_prefix(norm_first, fast):
    model, src, src_mask = model_and_source(1, norm_first, fast)
    memory = model.encode(src, src_mask)
    cache = DecoderCache(model, memory, src_mask)
    ys = torch.full((src.size(0), 1), BOS_ID)
    with torch.no_grad():
        for _ in range(8):
            cached = cache.log_probs(ys)
            torch.testing.assert_close(cached, next_log_probs(model, ys, memory, src_mask),
                                       rtol=1e-5, atol=1e-5)
            ys = torch.cat([ys, torch.randint(4, VOCAB, (src.size(0), 1))], dim=1)


def test_reordered_rows_follow_their_hypotheses():
    # Beam search's rows: hypotheses of one sentence, so one source for all of them.
    model, src, src_mask = model_and_source(2, True)
    memory = model.encode(src[:1], src_mask[:1]).expand(6, -1, -1)
    mask = src_mask[:1].expand(6, -1, -1, -1)
    cache = DecoderCache(model, memory, mask)
    ys = torch.cat([torch.full((6, 1), BOS_ID), torch.randint(4, VOCAB, (6, 3))], dim=1)
    with torch.no_grad():
        for t in range(1, ys.size(1) + 1):
            cache.log_probs(ys[:, :t])
        rows = torch.tensor([3, 3, 0, 5, 1, 2])
        cache.reorder(rows)
        moved = torch.cat([ys[rows], torch.arange(4, 10)[:, None]], dim=1)
        torch.testing.assert_close(cache.log_probs(moved),
                                   next_log_probs(model, moved, memory, mask),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoders_give_the_plain_decoders_outputs(seed, norm_first):
    model, src, src_mask = model_and_source(seed, norm_first)
    assert cached_greedy_decode(model, src, src_mask, 15) == greedy_decode(model, src, src_mask,
                                                                           15)
    for k, alpha in ((1, 0.0), (3, 0.6), (5, 1.0)):
        assert cached_beam_search(model, src, src_mask, 15, k, alpha) == beam_search(
            model, src, src_mask, 15, k, alpha)


def test_models_the_cache_does_not_know_are_decoded_plainly():
    model, src, src_mask = model_and_source(0, True)
    assert can_cache(model)
    assert not can_cache(model.train())  # dropout on: the steps would differ from training's
    model.eval()

    class Doubled(type(model.decoder.layers[0])):
        def forward(self, x, memory, src_mask, tgt_mask):
            return 2 * super().forward(x, memory, src_mask, tgt_mask)

    odd = make_model(VOCAB, VOCAB, N=2, d_model=32, d_ff=64, h=4, norm_first=True).eval()
    odd.load_state_dict(model.state_dict())
    first = odd.decoder.layers[0]
    odd.decoder.layers[0] = Doubled(32, 4, 64, norm_first=True)
    odd.decoder.layers[0].load_state_dict(first.state_dict())
    assert not can_cache(odd)  # a part still in training mode is enough
    odd.eval()
    assert not can_cache(odd)
    beam = functools.partial(beam_search, beam_size=3)
    assert cached_beam_search(odd, src, src_mask, 12, 3) == beam(odd, src, src_mask, 12)
    assert cached_greedy_decode(odd, src, src_mask, 12) == greedy_decode(odd, src, src_mask, 12)


def test_a_prefix_that_skips_a_step_is_refused():
    model, src, src_mask = model_and_source(0, True)
    cache = DecoderCache(model, model.encode(src, src_mask), src_mask)
    with pytest.raises(ValueError, match="holds 0 positions, so it needs prefixes of 1"):
        cache.log_probs(torch.full((6, 2), BOS_ID))
