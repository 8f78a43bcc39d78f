"""The NumPy reference: mathematical properties and comparisons with torch.nn implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from transformer_ref.np_attention import (
    attention_head,
    causal_mask,
    merge_heads,
    multi_head_attention,
    padding_mask,
    scaled_dot_product_attention,
    softmax,
    split_heads,
)
from transformer_ref.np_layers import (
    ENCODER_BLOCK_KEYS,
    add_and_norm,
    encoder,
    encoder_block,
    feed_forward,
    layer_norm,
)
from transformer_ref.numpy.positional import positional_encoding, relative_position_matrix

LEADING_SHAPES = [(), (3,), (2, 3)]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def block_params(rng: np.random.Generator, d_model: int, d_ff: int, dtype=np.float64) -> dict:
    shapes = {
        "W_q": (d_model, d_model),
        "W_k": (d_model, d_model),
        "W_v": (d_model, d_model),
        "W_o": (d_model, d_model),
        "W1": (d_model, d_ff),
        "b1": (d_ff,),
        "W2": (d_ff, d_model),
        "b2": (d_model,),
        "gamma1": (d_model,),
        "beta1": (d_model,),
        "gamma2": (d_model,),
        "beta2": (d_model,),
    }
    params = {name: rng.normal(0, 0.4, shape).astype(dtype) for name, shape in shapes.items()}
    params["gamma1"] += 1
    params["gamma2"] += 1
    return params


def torch_encoder_layer(params: dict, num_heads: int) -> torch.nn.TransformerEncoderLayer:
    """A torch post-LN encoder layer holding ``params`` (zero attention biases), in eval mode."""
    d_model, d_ff = params["W1"].shape
    layer = torch.nn.TransformerEncoderLayer(
        d_model, num_heads, d_ff, dropout=0.0, activation="relu", batch_first=True,
        norm_first=False, dtype=torch.float64,
    )  # fmt: skip
    t = {name: torch.from_numpy(value) for name, value in params.items()}
    with torch.no_grad():
        # torch's Linear computes x @ weight.T, so each of our x @ W matrices goes in transposed.
        layer.self_attn.in_proj_weight.copy_(torch.cat([t["W_q"].T, t["W_k"].T, t["W_v"].T]))
        layer.self_attn.in_proj_bias.zero_()
        layer.self_attn.out_proj.weight.copy_(t["W_o"].T)
        layer.self_attn.out_proj.bias.zero_()
        layer.linear1.weight.copy_(t["W1"].T)
        layer.linear1.bias.copy_(t["b1"])
        layer.linear2.weight.copy_(t["W2"].T)
        layer.linear2.bias.copy_(t["b2"])
        layer.norm1.weight.copy_(t["gamma1"])
        layer.norm1.bias.copy_(t["beta1"])
        layer.norm2.weight.copy_(t["gamma2"])
        layer.norm2.bias.copy_(t["beta2"])
    return layer.eval()


# --- positional encoding -------------------------------------------------------------------


def test_positional_encoding_matches_closed_form():
    pe = positional_encoding(7, 6)
    assert pe.shape == (7, 6) and pe.dtype == np.float32
    for pos in range(7):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)


def test_positional_encoding_is_bounded_with_unique_rows():
    pe = positional_encoding(200, 32)
    assert np.all(np.abs(pe) <= 1)
    assert len(np.unique(pe, axis=0)) == 200
    assert positional_encoding(0, 4).shape == (0, 4)


@pytest.mark.parametrize("d_model", [2, 8, 64])
@pytest.mark.parametrize("k", [-5, -1, 0, 1, 3, 17])
def test_relative_position_matrix_shifts_every_position(k, d_model):
    pe = positional_encoding(80, d_model).astype(np.float64)
    m = relative_position_matrix(k, d_model)
    assert m.shape == (d_model, d_model)
    p = np.arange(max(0, -k), 80 - max(0, k))
    np.testing.assert_allclose(pe[p] @ m, pe[p + k], atol=1e-5)
    np.testing.assert_allclose(m @ m.T, np.eye(d_model), atol=1e-12)


def test_relative_position_matrices_compose():
    np.testing.assert_allclose(
        relative_position_matrix(2, 16) @ relative_position_matrix(5, 16),
        relative_position_matrix(7, 16),
        atol=1e-12,
    )


# --- softmax and masks ---------------------------------------------------------------------


def test_softmax_matches_naive_formula(rng):
    x = rng.normal(size=(4, 5))
    naive = np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(softmax(x), naive, rtol=1e-12)
    naive0 = np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)
    np.testing.assert_allclose(softmax(x, axis=0), naive0, rtol=1e-12)


def test_softmax_is_stable_for_huge_logits():
    out = softmax(np.array([1e4, 1e4 - 1.0, -1e4]))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, [1 / (1 + math.exp(-1)), 1 / (1 + math.e), 0], atol=1e-12)


def test_softmax_gives_exact_zero_to_minus_inf():
    out = softmax(np.array([[0.5, -np.inf, 1.0], [-np.inf, 2.0, -np.inf]]))
    assert out[0, 1] == 0 and out[1, 0] == 0 and out[1, 2] == 0
    np.testing.assert_allclose(out.sum(axis=-1), 1)


def test_causal_mask_is_lower_triangular():
    mask = causal_mask(5)
    assert mask.dtype == bool and mask.shape == (5, 5)
    for i in range(5):
        for j in range(5):
            assert mask[i, j] == (j <= i)


def test_padding_mask_marks_real_tokens():
    mask = padding_mask(np.array([3, 1, 0]), 4)
    assert mask.dtype == bool and mask.shape == (3, 1, 4)
    np.testing.assert_array_equal(mask[:, 0], [[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])


# --- scaled dot-product attention ----------------------------------------------------------


@pytest.mark.parametrize("lead", LEADING_SHAPES)
def test_attention_weights_are_distributions(rng, lead):
    q, k, v = (rng.normal(size=lead + (n, 4)) for n in (3, 5, 5))
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == lead + (3, 4) and weights.shape == lead + (3, 5)
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1)
    np.testing.assert_allclose(out, weights @ v)


@pytest.mark.parametrize(
    "make_mask",
    [
        lambda: None,
        lambda: causal_mask(5),
        lambda: padding_mask(np.array([5, 2]), 5),
        lambda: causal_mask(5).astype(int),  # 0/1 masks mean the same as booleans
    ],
    ids=["none", "causal", "padding", "causal-0/1"],
)
def test_attention_matches_torch(rng, make_mask):
    q, k, v = (rng.normal(size=(2, 5, d)) for d in (4, 4, 3))
    mask = make_mask()
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    t_mask = None if mask is None else torch.from_numpy(np.asarray(mask).astype(bool))
    expected = F.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=t_mask
    )
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-10, atol=1e-12)
    if mask is not None:
        assert np.all(weights[~np.broadcast_to(np.asarray(mask, bool), weights.shape)] == 0)


def test_padding_mask_equals_dropping_padded_keys(rng):
    q, k, v = (rng.normal(size=(1, 4, 6)) for _ in range(3))
    out, _ = scaled_dot_product_attention(q, k, v, padding_mask(np.array([2]), 4))
    short, _ = scaled_dot_product_attention(q, k[:, :2], v[:, :2])
    np.testing.assert_allclose(out, short)


def test_fully_masked_row_gives_nan_as_documented():
    q = k = v = np.ones((2, 2))
    with np.errstate(invalid="ignore"):
        _, weights = scaled_dot_product_attention(q, k, v, np.array([[True, True], [False, False]]))
    assert np.all(np.isfinite(weights[0])) and np.all(np.isnan(weights[1]))


def test_attention_head_projects_then_attends(rng):
    x_q, x_kv = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 4, 6))
    W_q, W_k, W_v = rng.normal(size=(6, 5)), rng.normal(size=(6, 5)), rng.normal(size=(6, 2))
    mask = padding_mask(np.array([4, 3]), 4)
    out, weights = attention_head(x_q, x_kv, W_q, W_k, W_v, mask)
    expected = F.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (x_q @ W_q, x_kv @ W_k, x_kv @ W_v)),
        attn_mask=torch.from_numpy(mask),
    )
    assert out.shape == (2, 3, 2) and weights.shape == (2, 3, 4)
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-10, atol=1e-12)


# --- heads ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lead", LEADING_SHAPES)
def test_split_and_merge_heads_are_inverse(rng, lead):
    x = rng.normal(size=lead + (5, 12))
    heads = split_heads(x, 3)
    assert heads.shape == lead + (3, 5, 4)
    for i in range(3):
        np.testing.assert_array_equal(heads[..., i, :, :], x[..., 4 * i : 4 * (i + 1)])
    np.testing.assert_array_equal(merge_heads(heads), x)


@pytest.mark.parametrize("lead", LEADING_SHAPES)
@pytest.mark.parametrize("use_mask", [False, True])
def test_multi_head_attention_equals_loop_over_heads(rng, lead, use_mask):
    d_model, h, n_q, n_k = 12, 3, 4, 6
    d_head = d_model // h
    x_q, x_kv = rng.normal(size=lead + (n_q, d_model)), rng.normal(size=lead + (n_k, d_model))
    W_q, W_k, W_v, W_o = (rng.normal(size=(d_model, d_model)) for _ in range(4))
    mask = rng.random(lead + (n_q, n_k)) < 0.7 if use_mask else None
    if mask is not None:
        mask[..., 0] = True  # never a fully masked row

    out, weights = multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, h, mask)
    assert out.shape == lead + (n_q, d_model) and weights.shape == lead + (h, n_q, n_k)
    expected = np.zeros_like(out)
    for i in range(h):
        cols = slice(i * d_head, (i + 1) * d_head)
        head, head_weights = attention_head(
            x_q, x_kv, W_q[:, cols], W_k[:, cols], W_v[:, cols], mask
        )
        np.testing.assert_allclose(weights[..., i, :, :], head_weights, rtol=1e-12)
        expected += head @ W_o[cols, :]
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


def test_multi_head_attention_accepts_padding_mask(rng):
    x = rng.normal(size=(2, 4, 8))
    W = [rng.normal(size=(8, 8)) for _ in range(4)]
    _, weights = multi_head_attention(x, x, *W, 2, padding_mask(np.array([4, 2]), 4))
    assert weights.shape == (2, 2, 4, 4)
    assert np.all(weights[1, :, :, 2:] == 0)


# --- layer norm, feed-forward, encoder -----------------------------------------------------


def test_layer_norm_example_and_constant_vector():
    np.testing.assert_allclose(
        layer_norm(np.array([1.0, 2.0, 3.0])), [-1.2247, 0, 1.2247], atol=1e-4
    )
    np.testing.assert_array_equal(layer_norm(np.full((2, 5), 7.0)), np.zeros((2, 5)))


@pytest.mark.parametrize("lead", LEADING_SHAPES)
def test_layer_norm_matches_torch(rng, lead):
    x = rng.normal(3, 2, size=lead + (4, 7))
    gamma, beta = rng.normal(size=7), rng.normal(size=7)
    expected = F.layer_norm(
        torch.from_numpy(x), (7,), torch.from_numpy(gamma), torch.from_numpy(beta)
    )
    np.testing.assert_allclose(layer_norm(x, gamma, beta), expected.numpy(), rtol=1e-10, atol=1e-12)
    plain = F.layer_norm(torch.from_numpy(x), (7,), eps=1e-3)
    np.testing.assert_allclose(layer_norm(x, eps=1e-3), plain.numpy(), rtol=1e-10, atol=1e-12)


def test_feed_forward_matches_torch(rng):
    p = block_params(rng, 6, 10)
    x = rng.normal(size=(2, 3, 6))
    net = torch.nn.Sequential(
        torch.nn.Linear(6, 10, dtype=torch.float64),
        torch.nn.ReLU(),
        torch.nn.Linear(10, 6, dtype=torch.float64),
    )
    with torch.no_grad():
        net[0].weight.copy_(torch.from_numpy(p["W1"].T))
        net[0].bias.copy_(torch.from_numpy(p["b1"]))
        net[2].weight.copy_(torch.from_numpy(p["W2"].T))
        net[2].bias.copy_(torch.from_numpy(p["b2"]))
        expected = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(feed_forward(x, p["W1"], p["b1"], p["W2"], p["b2"]), expected)


def test_add_and_norm_is_layer_norm_of_sum(rng):
    x, y = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    gamma, beta = rng.normal(size=4), rng.normal(size=4)
    t_gamma, t_beta = torch.from_numpy(gamma), torch.from_numpy(beta)
    expected = F.layer_norm(torch.from_numpy(x + y), (4,), t_gamma, t_beta).numpy()
    np.testing.assert_allclose(add_and_norm(x, y, gamma, beta), expected, rtol=1e-10)


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal"])
def test_encoder_block_matches_torch_layer(rng, mask_kind):
    params = block_params(rng, 8, 16)
    x = rng.normal(size=(2, 5, 8))
    layer = torch_encoder_layer(params, num_heads=2)
    if mask_kind == "padding":
        mask = padding_mask(np.array([5, 3]), 5)
        # torch's key padding mask marks the positions to ignore: the opposite of ours.
        expected = layer(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(~mask[:, 0]))
    elif mask_kind == "causal":
        mask = causal_mask(5)
        expected = layer(torch.from_numpy(x), src_mask=torch.from_numpy(~mask))
    else:
        mask = None
        expected = layer(torch.from_numpy(x))
    out = encoder_block(x, params, num_heads=2, mask=mask)
    np.testing.assert_allclose(out, expected.detach().numpy(), rtol=1e-9, atol=1e-10)


def test_encoder_equals_embedding_plus_positions_then_torch_layers(rng):
    vocab, d_model = 11, 8
    embedding = rng.normal(size=(vocab, d_model))
    layers = [block_params(rng, d_model, 16) for _ in range(2)]
    tokens = rng.integers(0, vocab, size=(3, 6))
    mask = padding_mask(np.array([6, 4, 1]), 6)

    out, weights = encoder(tokens, embedding, layers, 2, mask, return_weights=True)
    x = torch.from_numpy(embedding[tokens] * math.sqrt(d_model) + positional_encoding(6, d_model))
    np.testing.assert_allclose(encoder(tokens, embedding, [], 2), x.numpy(), rtol=1e-12)
    for params in layers:
        x = torch_encoder_layer(params, 2)(x, src_key_padding_mask=torch.from_numpy(~mask[:, 0]))
    np.testing.assert_allclose(out, x.detach().numpy(), rtol=1e-9, atol=1e-10)
    assert len(weights) == 2 and weights[0].shape == (3, 2, 6, 6)


# --- dtypes --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_dtype_is_preserved(rng, dtype):
    x = rng.normal(size=(2, 4, 8)).astype(dtype)
    p = block_params(rng, 8, 16, dtype)
    W = [p[name] for name in ("W_q", "W_k", "W_v", "W_o")]
    mask = causal_mask(4)
    results = [
        softmax(x),
        scaled_dot_product_attention(x, x, x, mask)[0],
        attention_head(x, x, *W[:3], mask)[1],
        split_heads(x, 2),
        merge_heads(split_heads(x, 2)),
        *multi_head_attention(x, x, *W, 2, mask),
        layer_norm(x, p["gamma1"], p["beta1"]),
        feed_forward(x, p["W1"], p["b1"], p["W2"], p["b2"]),
        add_and_norm(x, x, p["gamma1"], p["beta1"]),
        encoder_block(x, p, 2, mask),
        encoder(np.array([[1, 2, 3]]), x[0], [p], 2),
    ]
    assert [r.dtype for r in results] == [np.dtype(dtype)] * len(results)


def test_float32_agrees_with_float64(rng):
    p64 = block_params(rng, 8, 16)
    p32 = {name: value.astype(np.float32) for name, value in p64.items()}
    x = rng.normal(size=(2, 5, 8))
    np.testing.assert_allclose(
        encoder_block(x.astype(np.float32), p32, 2), encoder_block(x, p64, 2), rtol=1e-3, atol=1e-4
    )


# --- bad input -----------------------------------------------------------------------------

Z = np.zeros


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: positional_encoding(4, 5), r"d_model must be even.*got 5"),
        (lambda: positional_encoding(4, 0), r"d_model must be at least 1, got 0"),
        (lambda: positional_encoding(-1, 4), r"seq_len must be at least 0, got -1"),
        (lambda: relative_position_matrix(1, 7), r"d_model must be even"),
        (lambda: causal_mask(-2), r"causal_mask: n must be at least 0"),
        (lambda: padding_mask(np.array([5]), 4), r"\[0, max_len=4\].*5"),
        (lambda: padding_mask(np.array([[1]]), 4), r"1-D integer array.*\(1, 1\)"),
        (
            lambda: scaled_dot_product_attention(Z((3, 8)), Z((3, 6)), Z((3, 4))),
            r"^scaled_dot_product_attention: q has last dimension 8 but k has 6; "
            r"q and k must share d_k$",
        ),
        (
            lambda: scaled_dot_product_attention(Z((3, 4)), Z((5, 4)), Z((4, 4))),
            r"k has size 5 on axis -2 but v has 4",
        ),
        (lambda: scaled_dot_product_attention(Z(4), Z((5, 4)), Z((5, 4))), r"q must have shape"),
        (
            lambda: scaled_dot_product_attention(Z((2, 3, 4)), Z((3, 5, 4)), Z((3, 5, 4))),
            r"leading \(batch\) dimensions do not broadcast: q \(2,\), k \(3,\)",
        ),
        (
            lambda: scaled_dot_product_attention(Z((3, 4)), Z((5, 4)), Z((5, 4)), Z((3, 4), bool)),
            r"mask of shape \(3, 4\) cannot broadcast to .* \(3, 5\)",
        ),
        (
            lambda: scaled_dot_product_attention(
                Z((3, 4)), Z((3, 4)), Z((3, 4)), np.where(causal_mask(3), 0.0, -np.inf)
            ),
            r"boolean or 0/1.*additive",
        ),
        (
            lambda: attention_head(Z((3, 6)), Z((3, 6)), Z((4, 2)), Z((6, 2)), Z((6, 2))),
            r"x_q has last dimension 6 but W_q has 4 rows",
        ),
        (
            lambda: attention_head(Z((3, 6)), Z((3, 6)), Z((6, 2)), Z((6, 3)), Z((6, 2))),
            r"W_q has last dimension 2 but W_k has 3",
        ),
        (lambda: split_heads(Z((3, 10)), 4), r"d_model=10 is not divisible by num_heads=4"),
        (lambda: split_heads(Z((3, 8)), 0), r"num_heads must be at least 1"),
        (lambda: merge_heads(Z((3, 8))), r"merge_heads: x must have shape .* got shape \(3, 8\)"),
        (
            lambda: multi_head_attention(Z((2, 3, 6)), Z((2, 3, 6)), *[Z((6, 6))] * 4, 4),
            r"W_q.shape\[1\]=6 is not divisible by num_heads=4",
        ),
        (
            lambda: multi_head_attention(
                Z((2, 3, 6)), Z((2, 4, 6)), *[Z((6, 6))] * 4, 2, mask=Z((2, 1, 3), bool)
            ),
            r"mask of shape \(2, 1, 3\) cannot broadcast .* \(2, 3, 4\)",
        ),
        (lambda: layer_norm(Z((2, 4)), gamma=Z(3)), r"gamma must have shape \(4,\), got"),
        (
            lambda: feed_forward(Z((2, 4)), Z((4, 8)), Z(7), Z((8, 4)), Z(4)),
            r"b1 must have shape \(8,\)",
        ),
        (
            lambda: feed_forward(Z((2, 4)), Z((4, 8)), Z(8), Z((6, 4)), Z(4)),
            r"W1 has last dimension 8 but W2 has 6 rows",
        ),
        (lambda: add_and_norm(Z((2, 4)), Z((2, 3)), None, None), r"x has shape \(2, 4\) but"),
        (
            lambda: encoder_block(Z((2, 4)), {"W_q": Z((4, 4))}, 2),
            r"params is missing the key\(s\) W_k, W_v, .*beta2",
        ),
        (
            lambda: encoder(np.array([[0, 9]]), Z((5, 4)), [], 2),
            r"token ids must lie in \[0, vocab=5\)",
        ),
        (lambda: encoder(np.array([[0.5]]), Z((5, 4)), [], 2), r"tokens must be integer ids"),
        (
            lambda: encoder(np.array([[0]]), Z((5, 3)), [], 1),
            r"^encoder: d_model \(embedding.shape\[1\]\) must be even.*got 3",
        ),
    ],
)
def test_bad_input_raises_value_error_with_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_encoder_block_names_every_expected_key():
    assert set(ENCODER_BLOCK_KEYS) == {
        "W_q", "W_k", "W_v", "W_o", "W1", "b1", "W2", "b2", "gamma1", "beta1", "gamma2", "beta2",
    }  # fmt: skip


def test_non_numeric_input_raises_type_error():
    with pytest.raises(TypeError, match=r"softmax: x must be an array of real numbers"):
        softmax(np.array(["a", "b"]))
    with pytest.raises(TypeError, match=r"num_heads must be an integer, got 2.0"):
        split_heads(Z((2, 4)), 2.0)
