"""The PyTorch reference model, checked against torch.nn, the NumPy reference and properties.

Comparisons run in float64 with dropout 0 on tiny sizes, so the whole file takes seconds.
"""

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call

from transformer_ref.data.vocab import EOS_ID, PAD_ID
from transformer_ref.masks import make_src_mask, make_tgt_mask, shift_right, subsequent_mask
from transformer_ref.modules import (
    DecoderLayer,
    EncoderDecoder,
    EncoderLayer,
    MultiHeadAttention,
    PositionalEncoding,
    attention,
    fused_attention,
    make_model,
    store_attention,
)
from transformer_ref.np_attention import multi_head_attention as np_multi_head_attention
from transformer_ref.np_layers import encoder_block as np_encoder_block
from transformer_ref.numpy.positional import positional_encoding as np_positional_encoding

D_MODEL, HEADS, D_FF, LAYERS = 16, 4, 32, 2
SRC_VOCAB, TGT_VOCAB = 11, 13
TOL = dict(rtol=1e-10, atol=1e-10)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def tiny_model(**options) -> EncoderDecoder:
    """A float64 model in eval mode without dropout."""
    model = make_model(
        SRC_VOCAB, TGT_VOCAB, N=LAYERS, d_model=D_MODEL, d_ff=D_FF, h=HEADS, dropout=0.0,
        **options,
    )
    return model.double().eval()


def tiny_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Source (2, 6) and decoder input (2, 5), both with padding in the second row."""
    src = torch.tensor([[4, 5, 6, 7, 8, EOS_ID], [9, 10, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
    tgt = torch.tensor([[4, 5, 6, 7, EOS_ID], [8, 9, EOS_ID, PAD_ID, PAD_ID]])
    return src, shift_right(tgt)


def random_mask(*shape: int) -> torch.Tensor:
    """A random bool mask in which every query row keeps at least its first key."""
    mask = torch.rand(*shape) < 0.6
    mask[..., 0] = True
    return mask


def rand64(*shape: int, requires_grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, requires_grad=requires_grad)


# ---------------------------------------------------------------------------------------------
# Attention: math path, fused path, properties
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask_shape", [None, (2, 1, 1, 6), (2, 1, 5, 6), (2, 3, 5, 6)])
def test_math_and_fused_attention_agree_in_values_and_gradients(mask_shape):
    q, k, v = rand64(2, 3, 5, 4), rand64(2, 3, 6, 4), rand64(2, 3, 6, 7)
    mask = None if mask_shape is None else random_mask(*mask_shape)
    upstream = rand64(2, 3, 5, 7)

    results = []
    for path in ("math", "fused"):
        inputs = [t.clone().requires_grad_() for t in (q, k, v)]
        if path == "math":
            out, _ = attention(*inputs, mask)
        else:
            out = fused_attention(*inputs, mask)
        out.backward(upstream)
        results.append((out.detach(), *(t.grad for t in inputs)))

    for math_result, fused_result in zip(*results, strict=True):
        torch.testing.assert_close(fused_result, math_result, **TOL)


def test_attention_weights_are_distributions_that_respect_the_mask():
    q, k, v = rand64(2, 3, 5, 4), rand64(2, 3, 6, 4), rand64(2, 3, 6, 4)
    mask = random_mask(2, 1, 5, 6)
    out, weights = attention(q, k, v, mask)
    assert out.shape == (2, 3, 5, 4)
    assert weights.shape == (2, 3, 5, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5, dtype=torch.float64))
    assert torch.all(weights.masked_select(~mask.expand_as(weights)) == 0)
    # The closed form: softmax(q k^T / sqrt(d_k)) v.
    scores = q @ k.transpose(-2, -1) / 2.0
    expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    torch.testing.assert_close(weights, expected, **TOL)


def test_attention_rejects_a_non_bool_mask():
    q = rand64(1, 1, 2, 4)
    with pytest.raises(TypeError, match="bool"):
        attention(q, q, q, torch.ones(1, 1, 2, 2))
    with pytest.raises(TypeError, match="bool"):
        fused_attention(q, q, q, torch.zeros(1, 1, 2, 2))


@pytest.mark.parametrize("path", ["math", "fused"])
def test_attention_gradcheck(path):
    mask = random_mask(1, 2, 3, 4)
    if path == "math":
        def fn(q, k, v):
            return attention(q, k, v, mask)[0]
    else:
        def fn(q, k, v):
            return fused_attention(q, k, v, mask)
    inputs = (rand64(1, 2, 3, 2, requires_grad=True), rand64(1, 2, 4, 2, requires_grad=True),
              rand64(1, 2, 4, 3, requires_grad=True))
    assert torch.autograd.gradcheck(fn, inputs)


# ---------------------------------------------------------------------------------------------
# Multi-head attention
# ---------------------------------------------------------------------------------------------


def copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """Load our w_q/w_k/w_v/w_o into torch's packed input projection and output projection."""
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        theirs.out_proj.bias.copy_(ours.w_o.bias)


@pytest.mark.parametrize("fast", [True, False])
def test_multi_head_attention_matches_torch(fast):
    ours = MultiHeadAttention(D_MODEL, HEADS, fast=fast).double()
    theirs = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True, dtype=torch.float64)
    copy_attention(ours, theirs)
    query, memory = rand64(2, 5, D_MODEL), rand64(2, 6, D_MODEL)
    key_is_pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    mask = ~key_is_pad[:, None, None, :]  # (B, 1, 1, n_k), True = may attend

    expected, expected_weights = theirs(
        query, memory, memory, key_padding_mask=key_is_pad, average_attn_weights=False
    )
    torch.testing.assert_close(ours(query, memory, memory, mask), expected, **TOL)

    store_attention(ours)
    torch.testing.assert_close(ours(query, memory, memory, mask), expected, **TOL)
    torch.testing.assert_close(ours.attn_weights, expected_weights, **TOL)


def test_multi_head_attention_matches_numpy_reference():
    ours = MultiHeadAttention(D_MODEL, HEADS).double()
    for linear in (ours.w_q, ours.w_k, ours.w_v, ours.w_o):
        nn.init.zeros_(linear.bias)  # the NumPy version has no biases
    store_attention(ours)
    query, memory = rand64(2, 5, D_MODEL), rand64(2, 6, D_MODEL)
    mask = random_mask(2, 1, 5, 6)

    with torch.no_grad():
        out = ours(query, memory, memory, mask)
    # nn.Linear stores (out, in) and computes x @ weight.T; NumPy uses x @ W with W (in, out).
    W_q, W_k, W_v, W_o = (
        layer.weight.detach().T.numpy() for layer in (ours.w_q, ours.w_k, ours.w_v, ours.w_o)
    )
    np_out, np_weights = np_multi_head_attention(
        query.numpy(), memory.numpy(), W_q, W_k, W_v, W_o, HEADS,
        mask[:, 0].numpy(),  # NumPy masks carry no head axis: (B, n_q, n_k)
    )
    np.testing.assert_allclose(out.numpy(), np_out, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ours.attn_weights.numpy(), np_weights, rtol=1e-10, atol=1e-10)


def test_multi_head_attention_rejects_indivisible_width():
    with pytest.raises(ValueError, match=r"d_model=10.*h=3"):
        MultiHeadAttention(10, 3)


def test_store_attention_switches_every_layer_and_clears_on_off():
    model = tiny_model()
    src, tgt_in = tiny_batch()
    model(src, tgt_in, make_src_mask(src), make_tgt_mask(tgt_in))
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert len(layers) == 3 * LAYERS
    assert all(layer.attn_weights is None for layer in layers)  # the fused path keeps none

    assert store_attention(model) is model
    model(src, tgt_in, make_src_mask(src), make_tgt_mask(tgt_in))
    cross = model.decoder.layers[0].cross_attn.attn_weights
    assert cross.shape == (2, HEADS, tgt_in.size(1), src.size(1))
    assert not cross.requires_grad
    # Padded source keys get no weight.
    assert torch.all(cross[1, :, :, 3:] == 0)
    self_weights = model.decoder.layers[0].self_attn.attn_weights
    assert torch.all(self_weights.triu(diagonal=1) == 0)  # nothing from the future

    store_attention(model, enabled=False)
    assert all(not layer.store_attention and layer.attn_weights is None for layer in layers)


def test_attention_dropout_acts_only_in_training():
    mha = MultiHeadAttention(D_MODEL, HEADS, dropout=0.5)
    x = torch.randn(2, 5, D_MODEL)
    mha.train()
    assert not torch.equal(mha(x, x, x), mha(x, x, x))
    mha.eval()
    torch.testing.assert_close(mha(x, x, x), mha(x, x, x), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# Layers against torch.nn and the NumPy reference
# ---------------------------------------------------------------------------------------------


def copy_encoder_layer(ours: EncoderLayer, theirs: nn.TransformerEncoderLayer) -> None:
    copy_attention(ours.self_attn, theirs.self_attn)
    theirs.linear1.load_state_dict(ours.feed_forward.w_1.state_dict())
    theirs.linear2.load_state_dict(ours.feed_forward.w_2.state_dict())
    theirs.norm1.load_state_dict(ours.norm1.state_dict())
    theirs.norm2.load_state_dict(ours.norm2.state_dict())


def copy_decoder_layer(ours: DecoderLayer, theirs: nn.TransformerDecoderLayer) -> None:
    copy_attention(ours.self_attn, theirs.self_attn)
    copy_attention(ours.cross_attn, theirs.multihead_attn)
    theirs.linear1.load_state_dict(ours.feed_forward.w_1.state_dict())
    theirs.linear2.load_state_dict(ours.feed_forward.w_2.state_dict())
    for name in ("norm1", "norm2", "norm3"):
        getattr(theirs, name).load_state_dict(getattr(ours, name).state_dict())


def randomize_norms(module: nn.Module) -> None:
    """Give every LayerNorm a non-trivial gain and shift, so copying them is really tested."""
    with torch.no_grad():
        for norm in module.modules():
            if isinstance(norm, nn.LayerNorm):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.5, 0.5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first):
    ours = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first).double().eval()
    randomize_norms(ours)
    theirs = nn.TransformerEncoderLayer(
        D_MODEL, HEADS, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first,
        dtype=torch.float64,
    ).eval()
    copy_encoder_layer(ours, theirs)
    x = rand64(2, 6, D_MODEL)
    key_is_pad = torch.tensor([[False] * 6, [False] * 3 + [True] * 3])
    expected = theirs(x, src_key_padding_mask=key_is_pad)
    torch.testing.assert_close(ours(x, ~key_is_pad[:, None, None, :]), expected, **TOL)


def test_encoder_layer_matches_numpy_encoder_block():
    ours = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0).double().eval()
    randomize_norms(ours)
    attn, ffn = ours.self_attn, ours.feed_forward
    for linear in (attn.w_q, attn.w_k, attn.w_v, attn.w_o):
        nn.init.zeros_(linear.bias)
    x = rand64(2, 6, D_MODEL)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, :]  # (B, 1, S)

    def numpy_of(t: torch.Tensor) -> np.ndarray:
        return t.detach().numpy()

    params = {
        "W_q": numpy_of(attn.w_q.weight.T), "W_k": numpy_of(attn.w_k.weight.T),
        "W_v": numpy_of(attn.w_v.weight.T), "W_o": numpy_of(attn.w_o.weight.T),
        "W1": numpy_of(ffn.w_1.weight.T), "b1": numpy_of(ffn.w_1.bias),
        "W2": numpy_of(ffn.w_2.weight.T), "b2": numpy_of(ffn.w_2.bias),
        "gamma1": numpy_of(ours.norm1.weight), "beta1": numpy_of(ours.norm1.bias),
        "gamma2": numpy_of(ours.norm2.weight), "beta2": numpy_of(ours.norm2.bias),
    }
    expected = np_encoder_block(x.numpy(), params, HEADS, mask.numpy())
    np.testing.assert_allclose(numpy_of(ours(x, mask[:, None])), expected, rtol=1e-9, atol=1e-9)


# nn.Transformer warns that pre-LN layers cannot use its nested-tensor inference path.
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("norm_first", [False, True])
def test_full_model_hidden_states_match_torch_transformer(norm_first):
    model = tiny_model(norm_first=norm_first)
    randomize_norms(model)
    theirs = nn.Transformer(
        D_MODEL, HEADS, LAYERS, LAYERS, D_FF, dropout=0.0, batch_first=True,
        norm_first=norm_first, dtype=torch.float64,
    ).eval()
    for ours_layer, their_layer in zip(model.encoder.layers, theirs.encoder.layers, strict=True):
        copy_encoder_layer(ours_layer, their_layer)
    for ours_layer, their_layer in zip(model.decoder.layers, theirs.decoder.layers, strict=True):
        copy_decoder_layer(ours_layer, their_layer)
    if norm_first:
        theirs.encoder.norm.load_state_dict(model.encoder.norm.state_dict())
        theirs.decoder.norm.load_state_dict(model.decoder.norm.state_dict())
    else:
        # nn.Transformer always ends both stacks with a LayerNorm; the paper's post-LN does not.
        theirs.encoder.norm = None
        theirs.decoder.norm = None

    src, tgt_in = tiny_batch()
    src_mask, tgt_mask = make_src_mask(src), make_tgt_mask(tgt_in)
    x_src = model.pos_encoding(model.src_embed(src))
    x_tgt = model.pos_encoding(model.tgt_embed(tgt_in))
    # torch.nn marks positions to *ignore* with True: invert our masks.
    causal_ignore = ~subsequent_mask(tgt_in.size(1))[0]
    expected = theirs(
        x_src, x_tgt, tgt_mask=causal_ignore, src_key_padding_mask=src == PAD_ID,
        tgt_key_padding_mask=tgt_in == PAD_ID, memory_key_padding_mask=src == PAD_ID,
    )
    memory = model.encode(src, src_mask)
    torch.testing.assert_close(memory, theirs.encoder(x_src, src_key_padding_mask=src == PAD_ID),
                               **TOL)
    torch.testing.assert_close(model.decode(tgt_in, memory, src_mask, tgt_mask), expected, **TOL)
    torch.testing.assert_close(model(src, tgt_in, src_mask, tgt_mask), model.generator(expected),
                               **TOL)


# ---------------------------------------------------------------------------------------------
# Whole-model properties
# ---------------------------------------------------------------------------------------------


def test_future_target_tokens_do_not_change_earlier_logits():
    model = tiny_model()
    src, tgt_in = tiny_batch()
    changed = tgt_in.clone()
    changed[0, 3] = 12
    src_mask = make_src_mask(src)
    before = model(src, tgt_in, src_mask, make_tgt_mask(tgt_in))
    after = model(src, changed, src_mask, make_tgt_mask(changed))
    torch.testing.assert_close(after[:, :3], before[:, :3], **TOL)
    assert not torch.allclose(after[0, 3:], before[0, 3:])


def test_padding_changes_nothing():
    model = tiny_model()
    src, tgt_in = tiny_batch()
    src_mask, tgt_mask = make_src_mask(src), make_tgt_mask(tgt_in)
    logits = model(src, tgt_in, src_mask, tgt_mask)

    # Whatever sits under the padding mask is ignored ...
    scribbled = src.masked_fill(src == PAD_ID, 7)
    torch.testing.assert_close(model(scribbled, tgt_in, src_mask, tgt_mask), logits, **TOL)
    # ... and a padded sequence gives the same logits as the same sequence alone, unpadded.
    alone_src, alone_tgt = src[1:, :3], tgt_in[1:, :3]
    alone = model(alone_src, alone_tgt, make_src_mask(alone_src), make_tgt_mask(alone_tgt))
    torch.testing.assert_close(alone, logits[1:, :3], **TOL)


@pytest.mark.parametrize("fast", [True, False])
def test_gradcheck_tiny_full_model(fast):
    model = make_model(7, 7, N=1, d_model=8, d_ff=12, h=2, dropout=0.0, fast_attention=fast)
    model = model.double().eval()
    src = torch.tensor([[4, 5, EOS_ID], [6, EOS_ID, PAD_ID]])
    tgt_in = torch.tensor([[1, 4, 5], [1, 6, PAD_ID]])
    src_mask, tgt_mask = make_src_mask(src), make_tgt_mask(tgt_in)
    w_q_name = "layers.0.self_attn.w_q.weight"
    w_q = model.encoder.get_parameter(w_q_name).detach().clone().requires_grad_()

    def logits(x_src, x_tgt, w_q):
        memory = functional_call(model.encoder, {w_q_name: w_q}, (x_src, src_mask))
        return model.generator(model.decoder(x_tgt, memory, src_mask, tgt_mask))

    inputs = (rand64(2, 3, 8, requires_grad=True), rand64(2, 3, 8, requires_grad=True), w_q)
    # fast_mode compares random projections of the Jacobians: far fewer passes through the model.
    assert torch.autograd.gradcheck(logits, inputs, fast_mode=True)


def test_math_and_fused_models_agree_in_logits_and_gradients():
    fused = tiny_model()
    math = tiny_model(fast_attention=False)
    math.load_state_dict(fused.state_dict())
    src, tgt_in = tiny_batch()
    masks = make_src_mask(src), make_tgt_mask(tgt_in)
    outputs = []
    for model in (fused, math):
        logits = model(src, tgt_in, *masks)
        logits.square().sum().backward()
        outputs.append((logits, [p.grad for p in model.parameters()]))
    torch.testing.assert_close(outputs[0][0], outputs[1][0], **TOL)
    for grad_fused, grad_math in zip(outputs[0][1], outputs[1][1], strict=True):
        torch.testing.assert_close(grad_fused, grad_math, **TOL)


def expected_parameter_count(
    src_vocab: int, tgt_vocab: int, N: int, d_model: int, d_ff: int, *,
    share_embeddings: bool, tie_weights: bool, norm_first: bool,
) -> int:
    """Count the parameters from the architecture's description (weights and biases)."""
    attention = 4 * (d_model * d_model + d_model)  # w_q, w_k, w_v, w_o
    feed_forward = (d_model * d_ff + d_ff) + (d_ff * d_model + d_model)
    layer_norm = 2 * d_model  # gain and shift
    encoder = N * (attention + feed_forward + 2 * layer_norm)
    decoder = N * (2 * attention + feed_forward + 3 * layer_norm)
    final_norms = 2 * layer_norm if norm_first else 0
    embeddings = tgt_vocab * d_model + (0 if share_embeddings else src_vocab * d_model)
    generator = tgt_vocab + (0 if tie_weights else tgt_vocab * d_model)
    return encoder + decoder + final_norms + embeddings + generator


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # shared tensors are counted once


def test_base_model_parameter_count():
    # The paper's base model with its shared ~37000-token BPE vocabulary and one embedding
    # matrix for source, target and output: about 63.1M parameters (the paper rounds to 65M).
    with torch.device("meta"):  # shapes only: nothing is allocated
        model = make_model(37000, 37000, share_embeddings=True, tie_weights=True)
    expected = expected_parameter_count(
        37000, 37000, 6, 512, 2048, share_embeddings=True, tie_weights=True, norm_first=False
    )
    assert expected == 63_119_496
    assert count_parameters(model) == expected


@pytest.mark.parametrize("share_embeddings", [False, True])
@pytest.mark.parametrize("tie_weights", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_parameter_count_of_every_variant(share_embeddings, tie_weights, norm_first):
    vocab = 13
    model = make_model(
        vocab, vocab, N=LAYERS, d_model=D_MODEL, d_ff=D_FF, h=HEADS,
        share_embeddings=share_embeddings, tie_weights=tie_weights, norm_first=norm_first,
    )
    assert count_parameters(model) == expected_parameter_count(
        vocab, vocab, LAYERS, D_MODEL, D_FF, share_embeddings=share_embeddings,
        tie_weights=tie_weights, norm_first=norm_first,
    )


def test_weight_tying_and_sharing_use_one_storage():
    model = make_model(
        TGT_VOCAB, TGT_VOCAB, N=1, d_model=D_MODEL, d_ff=D_FF, h=HEADS,
        share_embeddings=True, tie_weights=True,
    )
    table = model.tgt_embed.lut.weight
    assert model.generator.proj.weight is table
    assert model.src_embed.lut.weight is table
    assert model.generator.proj.weight.data_ptr() == table.data_ptr()

    src, tgt_in = tiny_batch()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(src, tgt_in, make_src_mask(src), make_tgt_mask(tgt_in)).sum().backward()
    optimizer.step()
    assert torch.equal(model.generator.proj.weight, model.tgt_embed.lut.weight)

    untied = make_model(TGT_VOCAB, TGT_VOCAB, N=1, d_model=D_MODEL, d_ff=D_FF, h=HEADS)
    assert untied.generator.proj.weight.data_ptr() != untied.tgt_embed.lut.weight.data_ptr()
    assert untied.src_embed is not untied.tgt_embed


def test_sharing_embeddings_needs_equal_vocabularies():
    with pytest.raises(ValueError, match=r"src_vocab == tgt_vocab.*11 and 13"):
        make_model(11, 13, N=1, d_model=D_MODEL, d_ff=D_FF, h=HEADS, share_embeddings=True)


def test_pre_ln_model_ends_with_layer_norms_and_differs_from_post_ln():
    post, pre = tiny_model(), tiny_model(norm_first=True)
    assert isinstance(post.encoder.norm, nn.Identity)
    assert isinstance(post.decoder.norm, nn.Identity)
    assert isinstance(pre.encoder.norm, nn.LayerNorm)
    assert isinstance(pre.decoder.norm, nn.LayerNorm)
    assert all(layer.norm_first for layer in pre.encoder.layers)
    pre.load_state_dict(post.state_dict(), strict=False)  # same weights, other wiring
    src, tgt_in = tiny_batch()
    masks = make_src_mask(src), make_tgt_mask(tgt_in)
    assert not torch.allclose(pre(src, tgt_in, *masks), post(src, tgt_in, *masks))


@pytest.mark.parametrize("options", [{}, {"norm_first": True, "tie_weights": True}])
def test_config_round_trip_rebuilds_a_loadable_model(options):
    model = tiny_model(**options)
    assert model.config["norm_first"] == options.get("norm_first", False)
    rebuilt = make_model(**model.config).double().eval()
    rebuilt.load_state_dict(model.state_dict())  # strict: same names and shapes
    src, tgt_in = tiny_batch()
    masks = make_src_mask(src), make_tgt_mask(tgt_in)
    torch.testing.assert_close(rebuilt(src, tgt_in, *masks), model(src, tgt_in, *masks), **TOL)


# ---------------------------------------------------------------------------------------------
# Embeddings and positions
# ---------------------------------------------------------------------------------------------


def test_positional_encoding_is_a_buffer_from_the_numpy_table():
    pe = PositionalEncoding(D_MODEL, dropout=0.0, max_len=20)
    assert "pe" in dict(pe.named_buffers())
    assert len(list(pe.parameters())) == 0
    x = torch.zeros(2, 7, D_MODEL)
    expected = torch.from_numpy(np_positional_encoding(7, D_MODEL)).expand(2, -1, -1)
    torch.testing.assert_close(pe(x), expected, rtol=0, atol=0)
    assert pe.double()(x.double()).dtype == torch.float64


def test_positional_encoding_rejects_too_long_sequences():
    pe = PositionalEncoding(D_MODEL, dropout=0.0, max_len=5)
    with pytest.raises(ValueError, match=r"6 positions.*max_len is 5"):
        pe(torch.zeros(1, 6, D_MODEL))


def test_embeddings_are_scaled_and_generator_returns_raw_logits():
    model = tiny_model()
    ids = torch.tensor([[4, 5]])
    expected = model.src_embed.lut.weight[ids] * D_MODEL**0.5
    torch.testing.assert_close(model.src_embed(ids), expected, **TOL)
    hidden = rand64(2, 3, D_MODEL)
    logits = model.generator(hidden)
    assert logits.shape == (2, 3, TGT_VOCAB)
    assert not torch.allclose(logits.exp().sum(-1), torch.ones(2, 3, dtype=torch.float64))


def test_xavier_initialisation_bounds():
    model = make_model(50, 60, N=1, d_model=32, d_ff=64, h=4)
    for name, p in model.named_parameters():
        if p.dim() > 1:
            bound = (6 / (p.size(0) + p.size(1))) ** 0.5
            assert p.abs().max() <= bound, name
            assert p.abs().max() > 0.5 * bound, name
