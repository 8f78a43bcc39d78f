"""The architecture and multi-head figures draw what the model holds, and render."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from matplotlib.axes import Axes
from matplotlib.patches import Circle, FancyBboxPatch

from transformer_ref.figures.diagrams import (
    architecture,
    plot_multi_head_attention,
    plot_transformer,
)

VOCAB = 30


@pytest.fixture(autouse=True)
def agg_backend():
    plt.switch_backend("Agg")
    yield
    plt.close("all")


def texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def count(ax: Axes, fragment: str) -> int:
    return sum(fragment in t for t in texts(ax))


def test_the_paper_base_model_by_default(tmp_path):
    ax = plot_transformer({})
    assert count(ax, "N = 6\nlayers") == 2
    assert "d_model = 512, h = 8, d_ff = 2048" in ax.get_title()
    assert "post-LN (as in the paper)" in ax.get_title()
    # Post-LN: every sub-layer (2 in an encoder layer, 3 in a decoder layer) ends in Add & Norm.
    assert count(ax, "Add & LayerNorm") == 5 and count(ax, "final LayerNorm") == 0
    assert count(ax, "mask: source padding") == 2 and count(ax, "mask: causal + padding") == 1
    assert count(ax, "memory\n(keys, values)") == 1 and count(ax, "Softmax") == 1
    assert count(ax, "Positional encoding\nsinusoidal") == 2
    ax.figure.savefig(tmp_path / "transformer.png")
    assert (tmp_path / "transformer.png").stat().st_size > 10_000


def test_the_number_of_layers_changes_the_figure():
    assert count(plot_transformer({"N": 2}), "N = 2\nlayers") == 2
    assert count(plot_transformer({"N": 2}), "N = 6") == 0


def test_pre_ln_moves_the_norms_before_the_sub_layers():
    post = plot_transformer({"norm_first": False})
    pre = plot_transformer({"norm_first": True})
    assert "pre-LN" in pre.get_title()
    assert count(pre, "Add & LayerNorm") == 0
    assert texts(pre).count("LayerNorm") == 5 and count(pre, "final LayerNorm (pre-LN)") == 2

    def additions(ax: Axes) -> int:  # the ⊕ of the positions, and of every pre-LN residual
        return sum(isinstance(p, Circle) for p in ax.patches)

    assert additions(post) == 2 and additions(pre) == 2 + 5
    # Pre-LN sub-layers sit above their norm: the figure grows.
    assert pre.get_ylim()[1] > post.get_ylim()[1]


def test_a_model_is_drawn_from_its_modules():
    from transformer_ref.model.build import build_model
    from transformer_ref.model.make_model import make_model

    for config in (dict(N=1, d_model=16, d_ff=24, h=2),
                   dict(N=3, d_model=32, d_ff=64, h=4, norm_first=True, share_embeddings=True,
                        tie_weights=True)):
        model = make_model(VOCAB, VOCAB, **config)
        assert architecture(model) == architecture(config)
        learned = build_model(VOCAB, VOCAB, positions="learned", **config)
        assert architecture(learned) == architecture({**config, "positions": "learned"})
    ax = plot_transformer(learned)
    assert "d_model = 32, h = 4, d_ff = 64" in ax.get_title() and "pre-LN" in ax.get_title()
    assert count(ax, "d_ff = 64, ReLU") == 2 and count(ax, "h = 4, mask") == 3
    assert count(ax, "shared table") == 2 and count(ax, "weight = target embedding table") == 1
    assert count(ax, "Positional encoding\nlearned table") == 2
    # model.config (as a checkpoint stores it) draws the same figure.
    assert architecture(learned.config) == architecture(learned)


def test_stacks_of_different_depths_are_labelled_each():
    from transformer_ref.model.make_model import make_model

    model = make_model(VOCAB, VOCAB, N=3, d_model=16, d_ff=32, h=2)
    del model.decoder.layers[2]
    ax = plot_transformer(model)
    assert "3 encoder and 2 decoder layers" in ax.get_title()
    assert count(ax, "N = 3\nlayers") == 1 and count(ax, "N = 2\nlayers") == 1


def test_the_encoder_alone():
    ax = plot_transformer({"N": 2, "d_model": 64, "h": 4, "d_ff": 128}, encoder_only=True)
    assert ax.get_title().startswith("The Transformer encoder: N = 2 layers")
    assert count(ax, "Add & LayerNorm") == 2 and count(ax, "Softmax") == 0
    assert count(ax, "memory\n(keys, values)") == 0
    assert count(ax, "encoder output (memory), width 64") == 1


def test_draws_on_given_axes_and_sizes_its_own_figure():
    fig, ax = plt.subplots()
    assert plot_transformer({}, ax=ax) is ax
    assert tuple(fig.get_size_inches()) == tuple(plt.rcParams["figure.figsize"])
    own = plot_transformer({}).figure.get_size_inches()
    assert own[1] > 6  # tall enough for the stacks' text


@pytest.mark.parametrize(("source", "message"), [
    ({"layers": 6}, "unknown configuration keys ['layers']"),
    ({"N": 0}, "N must be a positive int"),
    ({"d_model": 30, "h": 4}, "d_model=30 is not divisible by h=4"),
    ({"positions": "rotary"}, "positions must be 'sinusoidal' or 'learned'"),
    ("base", "expected a model built by make_model or a configuration dict"),
])
def test_bad_sources_are_named(source, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        plot_transformer(source)


def test_a_model_without_the_course_layout_is_named():
    from torch import nn

    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Linear(2, 2)

    with pytest.raises(ValueError, match="the model has no encoder.layers"):
        plot_transformer(Odd())


def test_mixed_layer_norm_placements_are_refused():
    from transformer_ref.model.make_model import make_model

    model = make_model(VOCAB, VOCAB, N=2, d_model=16, d_ff=32, h=2)
    model.decoder.layers[1].norm_first = True
    with pytest.raises(ValueError, match="mixes pre-LN and post-LN"):
        plot_transformer(model)


def head_boxes(ax: Axes) -> int:
    return sum(isinstance(p, FancyBboxPatch) for p in ax.patches)


def test_multi_head_figure_has_the_example_shapes(tmp_path):
    ax = plot_multi_head_attention(8, 32, 4)
    assert head_boxes(ax) == 4
    assert "4 heads of width d_k = 32 / 4 = 8" in ax.get_title()
    for label in ("X (8, 32)", "Q (8, 32)", "K (8, 32)", "V (8, 32)", "Concat (8, 32)",
                  "output (8, 32)", "split_heads", "merge_heads", "$W^O$", "(32, 32)",
                  "each head: weights (8, 8), output (8, 8)"):
        assert label in texts(ax), label
    assert count(ax, r"\sqrt{8}") == 4 and count(ax, "head 4:") == 1
    ax.figure.savefig(tmp_path / "mha.png")
    assert (tmp_path / "mha.png").stat().st_size > 10_000


def test_multi_head_figure_of_cross_attention_with_many_heads():
    ax = plot_multi_head_attention(5, 512, 16, kv_len=7)
    assert "cross-attention" in ax.get_title()
    assert {"X_q (5, 512)", "X_kv (7, 512)", "K (7, 512)", "Q (5, 512)"} <= set(texts(ax))
    assert head_boxes(ax) == 4 and "⋮" in texts(ax) and count(ax, "head 16:") == 1
    assert "each head: weights (5, 7), output (5, 32)" in texts(ax)


@pytest.mark.parametrize(("args", "message"), [
    ((8, 30, 4), "d_model=30 is not divisible by num_heads=4"),
    ((0, 32, 4), "seq_len must be a positive int"),
    ((8, 32, 2.0), "num_heads must be a positive int"),
])
def test_multi_head_figure_rejects_bad_shapes(args, message):
    with pytest.raises(ValueError, match=message):
        plot_multi_head_attention(*args)
