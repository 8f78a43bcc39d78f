"""The torch check toolkit: building, weight loading, output and gradient comparison, properties."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from autograder.exercises.checking import CheckContext, CheckFailure
from autograder.exercises.torch_checking import (
    build_modules,
    call_torch,
    check_causal,
    check_padding_invariant,
    compare_forward,
    expect_buffer,
    expect_deterministic,
    expect_dropout_probability,
    expected_signature,
    key_padding_mask,
    random_tensor,
    training_output,
)
from transformer_ref.modules import MultiHeadAttention, PositionalEncoding, PositionwiseFeedForward


def _context(reference, seed: int = 0) -> CheckContext:
    return CheckContext(exercise_id="ch07.test", hidden=False, rng=np.random.default_rng(seed),
                        reference=reference)


def _grade(learner, *inputs_shape: int) -> None:
    """Build PositionwiseFeedForward(6, 10, 0.2) and the learner's module, compare on one input."""
    ctx = _context(PositionwiseFeedForward)
    pair = build_modules(ctx, learner, 6, 10, 0.2)
    compare_forward(ctx, pair, (random_tensor(ctx.rng, inputs_shape or (2, 3, 6)),))


class GoodFFN(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))


def test_grading_a_numpy_exercise_never_imports_torch():
    code = ("import sys; from autograder import grade_function, exercises\n"
            "from transformer_ref.np_attention import softmax\n"
            "assert grade_function('ch02.softmax', softmax).passed\n"
            "assert any(i.startswith('ch07.') for i in exercises())\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_correct_module_passes_outputs_and_gradients():
    _grade(GoodFFN)
    _grade(GoodFFN, 4, 6)


def test_a_wrong_signature_shows_the_expected_one():
    class TwoArguments(GoodFFN):
        def __init__(self, d_model, d_ff):
            super().__init__(d_model, d_ff)

    with pytest.raises(CheckFailure) as info:
        _grade(TwoArguments)
    message = str(info.value)
    assert "TypeError" in message
    assert "PositionwiseFeedForward(d_model: int, d_ff: int, dropout: float = 0.1)" in message
    assert expected_signature(MultiHeadAttention).startswith("MultiHeadAttention(d_model: int")


def test_misnamed_layers_list_missing_unexpected_and_expected_keys():
    class Sequential(nn.Module):
        def __init__(self, d_model, d_ff, dropout=0.1):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

        def forward(self, x):
            return self.net(x)

    with pytest.raises(CheckFailure) as info:
        _grade(Sequential)
    message = str(info.value)
    assert "missing keys ['w_1.weight', 'w_1.bias', 'w_2.weight', 'w_2.bias']" in message
    assert "unexpected keys ['net.0.weight'" in message
    assert "load_state_dict" in message


def test_transposed_weight_shapes_are_named():
    class Transposed(GoodFFN):
        def __init__(self, d_model, d_ff, dropout=0.1):
            super().__init__(d_model, d_ff, dropout)
            self.w_1 = nn.Linear(d_ff, d_model)

    with pytest.raises(CheckFailure, match=r"w_1.weight: expected \(10, 6\), got \(6, 10\)"):
        _grade(Transposed)


def test_the_parameter_with_the_largest_gradient_error_is_named():
    class DoubledGradient(GoodFFN):
        """Right output; w_2.weight gets twice its gradient, w_1.bias 1.5 times."""

        def forward(self, x):
            w2 = 2 * self.w_2.weight - self.w_2.weight.detach()
            b1 = 1.5 * self.w_1.bias - 0.5 * self.w_1.bias.detach()
            hidden = torch.relu(F.linear(x, self.w_1.weight, b1))
            return F.linear(hidden, w2, self.w_2.bias)

    with pytest.raises(CheckFailure) as info:
        _grade(DoubledGradient)
    message = str(info.value)
    assert "gradient of parameter 'w_2.weight'" in message
    assert "2 of 4 parameters have wrong gradients" in message


def test_an_unused_parameter_and_a_detached_output_are_reported():
    class DetachedBias(GoodFFN):
        def forward(self, x):
            return F.linear(torch.relu(self.w_1(x)), self.w_2.weight, self.w_2.bias.detach())

    with pytest.raises(CheckFailure, match="'w_2.bias' received no gradient"):
        _grade(DetachedBias)

    class Detached(GoodFFN):
        def forward(self, x):
            return super().forward(x).detach()

    with pytest.raises(CheckFailure, match="autograd cannot reach"):
        _grade(Detached)


@pytest.mark.parametrize(
    ("forward", "words"),
    [
        (lambda self, x: (_ for _ in ()).throw(RuntimeError("boom")), "RuntimeError: boom"),
        (lambda self, x: (_ for _ in ()).throw(NotImplementedError()), "not done yet"),
        (lambda self, x: (x, x), "Return a single tensor"),
        (lambda self, x: x.detach().numpy(), "Stay in torch"),
        (lambda self, x: sys.exit(2), "SystemExit"),
        (lambda self, x: x[..., :3], "expected shape (2, 3, 6), got (2, 3, 3)"),
    ],
    ids=["raises", "stub", "tuple", "numpy", "exit", "shape"],
)
def test_learner_errors_become_messages(forward, words):
    learner = type("Broken", (GoodFFN,), {"forward": forward})
    with pytest.raises(CheckFailure) as info:
        _grade(learner)
    assert words in str(info.value)


def test_constructor_errors_and_non_modules_become_messages():
    with pytest.raises(CheckFailure, match="expected an instance of a torch.nn.Module"):
        _grade(lambda d_model, d_ff, dropout: "a string")

    class NoSuperInit(nn.Module):
        def __init__(self, d_model, d_ff, dropout=0.1):
            self.w_1 = nn.Linear(d_model, d_ff)

    with pytest.raises(CheckFailure, match="AttributeError"):
        _grade(NoSuperInit)


def test_in_place_changes_of_inputs_are_reported():
    def add_one(x):
        x += 1
        return x

    with pytest.raises(CheckFailure, match="modified argument 1 in place"):
        call_torch(add_one, torch.zeros(3))
    with pytest.raises(CheckFailure, match=r"add_one\(<float64 tensor \(2, 4\)>\) raised"):
        call_torch(add_one, torch.zeros(2, 4, dtype=torch.float64, requires_grad=True))


def test_construction_leaves_the_global_random_stream_alone():
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    build_modules(_context(PositionwiseFeedForward), GoodFFN, 6, 10, 0.2)
    assert torch.equal(torch.rand(3), expected)


def test_weights_are_random_and_shared():
    pair = build_modules(_context(PositionwiseFeedForward, seed=3), GoodFFN, 6, 10, 0.2)
    for name, parameter in pair.reference.named_parameters():
        assert parameter.dtype == torch.float64
        assert torch.equal(parameter, dict(pair.learner.named_parameters())[name])
    assert pair.reference.w_1.bias.abs().min() > 0  # not the zero initialisation
    assert not pair.learner.training


class TablePE(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000, as_parameter=False, persistent=True):
        super().__init__()
        table = PositionalEncoding(d_model, 0.0, max_len).pe.clone()
        if as_parameter:
            self.pe = nn.Parameter(table)
        else:
            self.register_buffer("pe", table, persistent=persistent)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(x + self.pe[:, : x.size(1)])


@pytest.mark.parametrize("persistent", [True, False])
def test_buffers_the_reference_also_has_are_allowed(persistent):
    ctx = _context(PositionalEncoding)
    pair = build_modules(ctx, lambda *a: TablePE(*a, persistent=persistent), 8, 0.2, 30)
    assert expect_buffer(pair.learner, "pe", pair.what).shape == (1, 30, 8)
    compare_forward(ctx, pair, (random_tensor(ctx.rng, (2, 5, 8)),))


def test_a_table_stored_as_a_parameter_fails_with_the_buffer_advice():
    with pytest.raises(CheckFailure, match=r"register_buffer\('pe'"):
        build_modules(_context(PositionalEncoding), lambda *a: TablePE(*a, as_parameter=True),
                      8, 0.2, 30)
    with pytest.raises(CheckFailure, match="no buffer named 'pe'"):
        expect_buffer(nn.Linear(2, 2), "pe", "Linear")


def test_dropout_properties():
    class DropoutAlways(GoodFFN):
        def forward(self, x):
            return self.w_2(F.dropout(torch.relu(self.w_1(x)), 0.5))

    class NoDropout(GoodFFN):
        def forward(self, x):
            return self.w_2(torch.relu(self.w_1(x)))

    x = torch.randn(4, 5, 6, dtype=torch.float64)
    with pytest.raises(CheckFailure, match="still active after model.eval"):
        expect_deterministic(DropoutAlways(6, 10, 0.5).double(), (x,), "m")
    module = GoodFFN(6, 10, 0.5).double()
    expect_deterministic(module, (x,), "m")
    calm = module(x)
    assert not torch.equal(training_output(module, (x,), 0, "m"), calm)
    assert torch.equal(training_output(module, (x,), 0, "m", only=["w_1"]), calm)
    assert torch.equal(training_output(module, (x,), 0, "m", frozen=["dropout"]), calm)
    assert not module.training and not module.dropout.training  # left in eval mode
    quiet = NoDropout(6, 10, 0.5).double().eval()
    assert torch.equal(training_output(quiet, (x,), 0, "m"), quiet(x))
    # Dropout layers of rate 0 drop nothing: where dropout is optional they are allowed.
    expect_dropout_probability(nn.Sequential(nn.Dropout(0.3), nn.Dropout(0.0)), 0.3, "m", "all")
    with pytest.raises(CheckFailure, match=r"use p = \[0.1\], but dropout=0.3"):
        expect_dropout_probability(nn.Sequential(nn.Dropout(0.1)), 0.3, "m", "all")


def test_causality_and_padding_properties():
    mha = MultiHeadAttention(8, 2).double().eval()
    x = random_tensor(np.random.default_rng(0), (2, 5, 8))
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    check_causal(mha, lambda z: (z, z, z, causal), x, 2, "causal attention")
    with pytest.raises(CheckFailure, match="a causal mask must hide the future"):
        check_causal(mha, lambda z: (z, z, z), x, 2, "unmasked attention")

    lengths = [5, 3]
    mask = key_padding_mask(lengths, 5)
    assert mask.shape == (2, 1, 1, 5) and mask.sum().item() == 8
    check_padding_invariant(mha, lambda z: (z, z, z, mask), x, lengths, "masked attention")
    with pytest.raises(CheckFailure, match="the mask must hide padding"):
        check_padding_invariant(mha, lambda z: (z, z, z), x, lengths, "unmasked attention")


class FusedAttention(nn.Module):
    """Multi-head attention with one fused projection to queries, keys and values."""

    def __init__(self, d_model, h, dropout=0.0, order=(0, 1, 2)):
        super().__init__()
        self.h, self.order = h, order
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.w_o = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        parts = self.qkv.weight.chunk(3), self.qkv.bias.chunk(3)
        q, k, v = (F.linear(x, parts[0][i], parts[1][i])
                   for x, i in zip((query, key, value), self.order, strict=True))
        B, T, D = q.shape
        heads = [z.view(B, -1, self.h, D // self.h).transpose(1, 2) for z in (q, k, v)]
        out = F.scaled_dot_product_attention(*heads, attn_mask=mask)
        return self.w_o(out.transpose(1, 2).reshape(B, T, D))


class TorchAttention(nn.Module):
    """torch.nn.MultiheadAttention under the course's call (in_proj_weight, out_proj)."""

    def __init__(self, d_model, h, dropout=0.0):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, h, batch_first=True)

    def forward(self, query, key, value, mask=None):
        return self.inner(query, key, value, need_weights=False)[0]


def _grade_attention(learner):
    ctx = _context(MultiHeadAttention)
    pair = build_modules(ctx, learner, 8, 2)
    x, y = random_tensor(ctx.rng, (2, 3, 8)), random_tensor(ctx.rng, (2, 5, 8))
    compare_forward(ctx, pair, (x, y, y))


def test_a_fused_qkv_projection_gets_the_same_weights_and_gradients():
    _grade_attention(FusedAttention)


def test_torchs_multihead_attention_layout_gets_the_same_weights_and_gradients():
    with pytest.raises(CheckFailure, match="unexpected keys \\['inner.in_proj_weight'"):
        _grade_attention(TorchAttention)  # one module further down: other names

    class Direct(nn.MultiheadAttention):
        def __init__(self, d_model, h, dropout=0.0):
            super().__init__(d_model, h, batch_first=True)

        def forward(self, query, key, value, mask=None):
            return super().forward(query, key, value, need_weights=False)[0]

    _grade_attention(Direct)


def test_a_fused_projection_in_another_order_is_wrong():
    class Swapped(FusedAttention):
        def __init__(self, d_model, h, dropout=0.0):
            super().__init__(d_model, h, dropout, order=(1, 0, 2))

    with pytest.raises(CheckFailure, match="differ"):
        _grade_attention(Swapped)


def test_gpt2_names_get_the_renames():
    class Gpt2Names(nn.Module):
        def __init__(self, d_model, d_ff, dropout=0.1):
            super().__init__()
            self.c_fc, self.c_proj = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

        def forward(self, x):
            return self.c_proj(torch.relu(self.c_fc(x)))

    with pytest.raises(CheckFailure, match="follow GPT-2's"):
        _grade(Gpt2Names)
