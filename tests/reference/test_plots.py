"""The plotting helpers draw what they promise on the Agg backend and reject bad input."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from transformer_ref.figures.plots import (
    plot_attention,
    plot_attention_grid,
    plot_curves,
    plot_label_smoothing,
    plot_lr_schedules,
    plot_pe_similarity,
    plot_pe_waves,
    plot_positional_encoding,
)
from transformer_ref.np_attention import softmax
from transformer_ref.numpy.positional import positional_encoding


@pytest.fixture(autouse=True)
def agg_backend():
    plt.switch_backend("Agg")
    yield
    plt.close("all")


@pytest.fixture
def pe() -> np.ndarray:
    return positional_encoding(20, 8)


def assert_labelled(ax: Axes) -> None:
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()


def test_positional_encoding_heatmap(pe, tmp_path):
    ax = plot_positional_encoding(pe)
    assert isinstance(ax, Axes)
    assert_labelled(ax)
    assert len(ax.images) == 1 and ax.images[0].get_array().shape == (20, 8)
    assert len(ax.figure.axes) == 2  # the heatmap and its colour bar
    ax.figure.savefig(tmp_path / "pe.png")
    assert (tmp_path / "pe.png").stat().st_size > 0


def test_positional_encoding_heatmap_draws_on_given_axes(pe):
    fig, ax = plt.subplots()
    assert plot_positional_encoding(pe, ax=ax) is ax


def test_pe_waves_draws_one_line_per_dimension(pe):
    ax = plot_pe_waves(pe, [0, 1, 5])
    assert_labelled(ax)
    assert len(ax.lines) == 3
    np.testing.assert_allclose(ax.lines[2].get_ydata(), pe[:, 5])
    with pytest.raises(ValueError, match=r"dims must be .* \[0, 8\), got \[8\]"):
        plot_pe_waves(pe, [8])


def test_pe_similarity_depends_on_distance_only(pe):
    ax = plot_pe_similarity(pe)
    assert_labelled(ax)
    mean_line = ax.lines[0]
    np.testing.assert_allclose(mean_line.get_ydata(), pe @ pe[0], rtol=1e-5)


def test_attention_heatmap_with_labels():
    weights = softmax(np.random.default_rng(0).normal(size=(3, 4)))
    ax = plot_attention(weights, ["a", "b", "c"], ["w", "x", "y", "z"], title="demo")
    assert ax.get_title() == "demo"
    assert_labelled(ax)
    assert len(ax.images) == 1
    np.testing.assert_allclose(ax.images[0].get_array(), weights)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["w", "x", "y", "z"]
    with pytest.raises(ValueError, match=r"key_labels has 2 labels but the weights have 4"):
        plot_attention(weights, key_labels=["w", "x"])


def test_attention_grid_has_one_panel_per_layer_and_head():
    weights = softmax(np.random.default_rng(0).normal(size=(2, 3, 4, 4)))
    fig = plot_attention_grid(weights, list("abcd"), list("abcd"), title="grid")
    assert isinstance(fig, Figure)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 6 and len(fig.axes) == 7  # six maps and one shared colour bar
    assert panels[4].get_title() == "layer 2, head 2"
    np.testing.assert_allclose(panels[4].images[0].get_array(), weights[1, 1])
    assert fig.get_suptitle() == "grid"


def test_lr_schedules_one_line_per_schedule():
    steps = np.arange(1, 50)
    ax = plot_lr_schedules({"a": (steps, 1 / steps), "b": (steps, 2 / steps)})
    assert_labelled(ax)
    assert len(ax.lines) == 2
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    with pytest.raises(ValueError, match=r"curve 'a' needs 1-D steps and rates of equal length"):
        plot_lr_schedules({"a": (steps, steps[:-1])})
    with pytest.raises(ValueError, match=r"non-empty dict"):
        plot_lr_schedules({})


def test_label_smoothing_heatmap():
    targets = np.full((3, 6), 0.02)
    targets[np.arange(3), [1, 2, 3]] = 0.9
    ax = plot_label_smoothing(targets)
    assert_labelled(ax)
    assert len(ax.images) == 1 and ax.images[0].get_array().shape == (3, 6)


def test_curves_count_from_one():
    ax = plot_curves({"train": [3.0, 2.0, 1.5], "val": [3.2, 2.5, 2.1]}, "epoch", "loss")
    assert ax.get_xlabel() == "epoch" and ax.get_ylabel() == "loss" and ax.get_title()
    assert len(ax.lines) == 2
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), [1, 2, 3])
    with pytest.raises(ValueError, match=r"curve 'x' must be a 1-D list"):
        plot_curves({"x": [[1.0, 2.0]]}, "epoch", "BLEU")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: plot_positional_encoding(np.zeros(5)), r"pe must have shape \(seq_len, d_model\)"),
        (lambda: plot_pe_waves(np.zeros((2, 3, 4)), [0]), r"pe must have shape"),
        (lambda: plot_pe_similarity(np.zeros((1, 4))), r"at least 2 positions"),
        (lambda: plot_attention(np.zeros((2, 3, 3))), r"weights must have shape \(n_q, n_k\)"),
        (lambda: plot_attention_grid(np.zeros((3, 3, 3))), r"\(layers, heads, n_q, n_k\)"),
        (lambda: plot_label_smoothing(np.zeros(6)), r"targets must have shape \(n, vocab\)"),
    ],
)
def test_wrong_shapes_raise_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("tokens", [3, 45])
def test_attention_grid_titles_never_overlap(tokens):
    """However long the sentence, panel titles stay clear of each other, of the tick labels
    and of the figure title, and the query labels do not run into each other."""
    weights = softmax(np.random.default_rng(1).normal(size=(3, 4, tokens, tokens)))
    labels = [f"▁Wort{i}" for i in range(tokens)]
    title = "Cross-attention: " + " ".join(labels) + " → " + " ".join(labels)
    fig = plot_attention_grid(weights, labels, labels, title=title)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.images]
    titles = [ax.title.get_window_extent(renderer) for ax in panels]
    ticks = [label.get_window_extent(renderer) for ax in panels
             for label in ax.get_xticklabels() + ax.get_yticklabels()
             if label.get_visible() and label.get_text()]
    suptitle = fig._suptitle.get_window_extent(renderer)
    for i, box in enumerate(titles):
        assert not any(_overlap(box, other) for other in titles[i + 1:])
        assert not any(_overlap(box, tick) for tick in ticks)
        assert not _overlap(box, suptitle)
    rows = sorted((label.get_window_extent(renderer) for label in panels[0].get_yticklabels()),
                  key=lambda b: b.y0)
    assert all(low.y1 <= high.y0 for low, high in zip(rows, rows[1:], strict=False))
    plt.close(fig)
