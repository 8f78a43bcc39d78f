"""The modern block's pieces: RMSNorm, SwiGLU, RoPE's two pairings, grouped-query attention,
and cached generation with RoPE, which must give exactly the tokens of the uncached model."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_ref.generation.rope_cache import cached_rope_attention, generate_greedy
from transformer_ref.model.grouped_attention import GroupedQueryAttention, grouped_query_attention
from transformer_ref.model.modern_layers import RmsNorm, Swiglu, swiglu_width
from transformer_ref.model.modern_lm import ModernLanguageModel
from transformer_ref.model.rope import apply_rope
from transformer_ref.training.lm_training import SHIPPED_BLOCKS, load_language_model


def test_rms_norm_rows_have_unit_root_mean_square() -> None:
    x = torch.randn(3, 5, 16, dtype=torch.float64) * 7
    y = RmsNorm(16, eps=0.0).double()(x)
    torch.testing.assert_close(y.pow(2).mean(-1), torch.ones(3, 5, dtype=torch.float64))
    assert torch.isfinite(RmsNorm(4)(torch.zeros(2, 4))).all()


def test_swiglu_width_matches_a_relu_ffn_in_parameters() -> None:
    assert swiglu_width(768) == 2048
    ffn = Swiglu(96)
    assert sum(p.numel() for p in ffn.parameters()) == pytest.approx(8 * 96 * 96, rel=0.01)
    x = torch.randn(2, 3, 96)
    torch.testing.assert_close(ffn(x), ffn.w2(F.silu(ffn.w1(x)) * ffn.w3(x)))


@pytest.mark.parametrize("pairing", ["interleaved", "halves"])
def test_rope_scores_depend_on_relative_position_only(pairing: str) -> None:
    q, k = torch.randn(1, 1, 1, 8, dtype=torch.float64), torch.randn(1, 1, 1, 8,
                                                                       dtype=torch.float64)

    def score(m: int, n: int) -> torch.Tensor:
        rq = apply_rope(q, torch.tensor([m]), pairing=pairing)
        rk = apply_rope(k, torch.tensor([n]), pairing=pairing)
        return (rq * rk).sum()

    torch.testing.assert_close(score(3, 7), score(10, 14))
    torch.testing.assert_close(apply_rope(q, torch.tensor([0]), pairing=pairing), q)


def test_rope_pairings_are_a_permutation_of_each_other() -> None:
    x, positions = torch.randn(2, 3, 5, 8, dtype=torch.float64), torch.arange(4, 9)
    order = torch.cat([torch.arange(0, 8, 2), torch.arange(1, 8, 2)])
    torch.testing.assert_close(apply_rope(x, positions)[..., order],
                               apply_rope(x[..., order], positions, pairing="halves"))


def test_grouped_query_attention_ends_are_mha_and_mqa() -> None:
    q = torch.randn(2, 4, 5, 8, dtype=torch.float64)
    k, v = torch.randn(2, 1, 6, 8, dtype=torch.float64), torch.randn(2, 1, 6, 8,
                                                                       dtype=torch.float64)
    expected = F.scaled_dot_product_attention(q, k.expand(2, 4, 6, 8), v.expand(2, 4, 6, 8))
    torch.testing.assert_close(grouped_query_attention(q, k, v), expected)
    k2, v2 = torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    got = grouped_query_attention(q.float(), k2, v2)
    torch.testing.assert_close(got[:, 1], F.scaled_dot_product_attention(q[:, 1].float(),
                                                                         k2[:, 0], v2[:, 0]))
    with pytest.raises(ValueError, match="do not divide"):
        grouped_query_attention(q, torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8))


def test_cached_attention_in_pieces_equals_the_whole_sequence() -> None:
    torch.manual_seed(0)
    attn = GroupedQueryAttention(16, 4, 2).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    first, k, v = cached_rope_attention(attn, x[:, :3], None, None)
    pieces = [first]
    for t in range(3, 7):
        out, k, v = cached_rope_attention(attn, x[:, t:t + 1], k, v)
        pieces.append(out)
    torch.testing.assert_close(torch.cat(pieces, dim=1), attn(x))


def test_cached_and_uncached_generation_give_identical_tokens() -> None:
    torch.manual_seed(1)
    model = ModernLanguageModel(50, N=2, d_model=32, h=4, n_kv_heads=2, max_len=40).eval()
    prompt = torch.randint(0, 50, (3, 5))
    cached = generate_greedy(model, prompt, 20, cached=True)
    assert torch.equal(cached, generate_greedy(model, prompt, 20, cached=False))
    assert cached.shape == (3, 25)


def test_the_modern_model_is_initialised_and_tied_as_chapter_11s() -> None:
    model = ModernLanguageModel(30, N=1, d_model=16, h=4, n_kv_heads=2)
    assert model.generator.proj.weight is model.embed.lut.weight
    untied = ModernLanguageModel(30, N=1, d_model=16, h=4, n_kv_heads=2, tie_weights=False)
    assert untied.generator.proj.weight is not untied.embed.lut.weight
    # Xavier-uniform bounds: sqrt(6 / (fan_in + fan_out)).
    w = untied.layers[0].feed_forward.w1.weight
    assert w.abs().max() <= math.sqrt(6 / sum(w.shape))
    assert w.abs().max() > 0.5 * math.sqrt(6 / sum(w.shape))


def test_the_shipped_blocks_have_the_same_size_and_load_into_their_classes() -> None:
    gpt, tok, gpt_record = load_language_model(SHIPPED_BLOCKS["gpt"])
    modern, _, modern_record = load_language_model(SHIPPED_BLOCKS["modern"],
                                                   model_class=ModernLanguageModel)
    sizes = [sum(p.numel() for p in m.parameters()) for m in (gpt, modern)]
    assert sizes[1] == pytest.approx(sizes[0], rel=1e-3)
    assert gpt_record["step"] == modern_record["step"]
    runs = modern_record["metrics"]["runs"]
    assert sorted((r["kind"], r["seed"]) for r in runs) == [
        ("gpt", 0), ("gpt", 1), ("modern", 0), ("modern", 1)]
    ids = torch.tensor([[1, *tok.encode("A dog runs on the grass.").ids]])
    with torch.no_grad():
        assert torch.isfinite(modern(ids)).all() and torch.isfinite(gpt(ids)).all()
