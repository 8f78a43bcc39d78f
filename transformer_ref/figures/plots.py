"""Matplotlib figures used by the notebooks: encodings, attention maps, schedules, curves.

Every function draws onto the Axes it is given (or a new one when ``ax`` is None), labels the
axes, sets a title and returns what it drew on, so a notebook can adjust or save the figure.
No function calls ``plt.show()``; notebooks display figures themselves.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.ticker import MaxNLocator
from numpy.typing import ArrayLike

from transformer_ref.validation import require_array


def _matrix(x: ArrayLike, ndim: int, name: str, where: str, layout: str) -> np.ndarray:
    array = require_array(x, name, where)
    if array.ndim != ndim:
        raise ValueError(f"{where}: {name} must have shape {layout}, got shape {array.shape}")
    return array


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _check_labels(labels: Sequence[str] | None, size: int, name: str, where: str) -> None:
    if labels is not None and len(labels) != size:
        raise ValueError(f"{where}: {name} has {len(labels)} labels but the weights have {size}")


def _require_curves(curves: Mapping, where: str) -> None:
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError(f"{where}: curves must be a non-empty dict {{label: values}}")


def plot_positional_encoding(pe: ArrayLike, ax: Axes | None = None) -> Axes:
    """Heatmap of a positional-encoding matrix ``pe`` of shape ``(seq_len, d_model)``.

    Rows are positions, columns are dimensions; the fast waves on the left and the slow ones on
    the right give each row its own pattern.
    """
    where = "plot_positional_encoding"
    pe = _matrix(pe, 2, "pe", where, "(seq_len, d_model)")
    ax = _axes(ax, (7, 4))
    image = ax.imshow(pe, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, label="value")
    ax.set(xlabel="dimension", ylabel="position", title="Sinusoidal positional encoding")
    return ax


def plot_pe_waves(pe: ArrayLike, dims: Sequence[int], ax: Axes | None = None) -> Axes:
    """Line plot of selected columns of ``pe`` ``(seq_len, d_model)`` against position."""
    where = "plot_pe_waves"
    pe = _matrix(pe, 2, "pe", where, "(seq_len, d_model)")
    dims = list(dims)
    if not dims or any(not 0 <= d < pe.shape[1] for d in dims):
        raise ValueError(
            f"{where}: dims must be a non-empty list of columns in [0, {pe.shape[1]}), got {dims}"
        )
    ax = _axes(ax, (7, 3.5))
    positions = np.arange(pe.shape[0])
    for d in dims:
        kind = "sin" if d % 2 == 0 else "cos"
        ax.plot(positions, pe[:, d], label=f"dim {d} ({kind})")
    ax.legend(loc="upper right", fontsize="small")
    ax.set(
        xlabel="position",
        ylabel="encoding value",
        title="Positional encoding: one wave per dimension",
    )
    return ax


def plot_pe_similarity(pe: ArrayLike, ax: Axes | None = None) -> Axes:
    """Dot product ``PE[p] . PE[p + k]`` against the distance ``k``, for every pair of positions.

    Each dot is one pair; the line is their mean. The dots fall on the line because the dot
    product depends only on the distance (it is ``sum_i cos(k w_i)``), and it shrinks as the
    positions move apart.
    """
    where = "plot_pe_similarity"
    pe = _matrix(pe, 2, "pe", where, "(seq_len, d_model)")
    if pe.shape[0] < 2:
        raise ValueError(f"{where}: pe needs at least 2 positions, got shape {pe.shape}")
    ax = _axes(ax, (6, 3.5))
    similarity = pe @ pe.T
    rows, cols = np.triu_indices(pe.shape[0])
    distances = cols - rows
    ax.scatter(distances, similarity[rows, cols], s=4, alpha=0.3, label="pairs of positions")
    mean = [
        similarity[rows[distances == k], cols[distances == k]].mean() for k in range(pe.shape[0])
    ]
    ax.plot(np.arange(pe.shape[0]), mean, color="black", label="mean over pairs")
    ax.legend(loc="upper right", fontsize="small")
    ax.set(
        xlabel="distance k between positions",
        ylabel="dot product PE[p] . PE[p+k]",
        title="Similarity of positional encodings against distance",
    )
    return ax


def _draw_attention(
    ax: Axes,
    weights: np.ndarray,
    query_labels: Sequence[str] | None,
    key_labels: Sequence[str] | None,
    vmax: float | None,
) -> AxesImage:
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=vmax, interpolation="nearest")
    if key_labels is not None:
        ax.set_xticks(range(len(key_labels)), key_labels, rotation=90)
    if query_labels is not None:
        ax.set_yticks(range(len(query_labels)), query_labels)
    ax.set(xlabel="key", ylabel="query")
    return image


def plot_attention(
    weights: ArrayLike,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Heatmap of one attention matrix ``weights`` ``(n_q, n_k)``: row i is where query i looks."""
    where = "plot_attention"
    weights = _matrix(weights, 2, "weights", where, "(n_q, n_k)")
    _check_labels(query_labels, weights.shape[0], "query_labels", where)
    _check_labels(key_labels, weights.shape[1], "key_labels", where)
    ax = _axes(ax, (5, 4.5))
    image = _draw_attention(ax, weights, query_labels, key_labels, vmax=None)
    ax.figure.colorbar(image, ax=ax, label="attention weight")
    ax.set_title(title or "Attention weights")
    return ax


# Attention grids give every token row and column this much room, so that tick labels in
# TICK_FONT_SIZE never touch; a panel is never smaller than MIN_PANEL_INCHES, so that its
# title fits above it.
CELL_INCHES = 0.17
TICK_FONT_SIZE = 7
MIN_PANEL_INCHES = 1.9


def plot_attention_grid(
    weights: ArrayLike,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """A grid of attention maps, one row per layer and one column per head.

    The figure grows with the number of tokens, so labels and panel titles never overlap,
    however long the sentence; the title is wrapped to the figure's width.

    Args:
        weights: ``(layers, heads, n_q, n_k)``; all panels share the colour scale 0..1.
        query_labels, key_labels: optional tick labels (length ``n_q`` and ``n_k``).
        title: figure title.

    Returns:
        The new Figure, holding ``layers * heads`` panels and one colour bar.
    """
    where = "plot_attention_grid"
    weights = _matrix(weights, 4, "weights", where, "(layers, heads, n_q, n_k)")
    num_layers, num_heads, n_q, n_k = weights.shape
    _check_labels(query_labels, n_q, "query_labels", where)
    _check_labels(key_labels, n_k, "key_labels", where)
    panel_w = max(MIN_PANEL_INCHES, CELL_INCHES * n_k)
    panel_h = max(MIN_PANEL_INCHES, CELL_INCHES * n_q)
    # Room for the tick labels (slanted at the bottom, level on the left) and the colour bar.
    label_room = CELL_INCHES * 0.6 * max((len(t) for t in (key_labels or [""])), default=1)
    left_room = CELL_INCHES * 0.6 * max((len(t) for t in (query_labels or [""])), default=1)
    fig_w = num_heads * (panel_w + 0.25) + left_room + 1.6
    fig_h = num_layers * (panel_h + 0.45) + label_room + 1.2
    fig, axes = plt.subplots(num_layers, num_heads, figsize=(fig_w, fig_h), squeeze=False,
                             layout="constrained")
    for layer in range(num_layers):
        for head in range(num_heads):
            ax = axes[layer, head]
            image = _draw_attention(ax, weights[layer, head], query_labels, key_labels, vmax=1)
            ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize="medium")
            ax.tick_params(labelsize=TICK_FONT_SIZE)
            # Slanted rather than upright key labels keep subword marks such as "▁" readable.
            for label in ax.get_xticklabels():
                label.set(rotation=45, horizontalalignment="right", rotation_mode="anchor")
            # Labels on the outer panels only keep the grid readable.
            if head > 0:
                ax.set_ylabel("")
                ax.tick_params(labelleft=False)
            if layer < num_layers - 1:
                ax.set_xlabel("")
                ax.tick_params(labelbottom=False)
    fig.colorbar(image, ax=axes, label="attention weight", shrink=0.8)
    text = title or "Attention weights per layer and head"
    fig.suptitle(textwrap.fill(text, width=max(40, int(fig_w * 9))))
    return fig


def plot_lr_schedules(
    curves: Mapping[str, tuple[ArrayLike, ArrayLike]], ax: Axes | None = None
) -> Axes:
    """Learning rate against training step, one line per schedule ``{label: (steps, rates)}``."""
    where = "plot_lr_schedules"
    _require_curves(curves, where)
    ax = _axes(ax, (6.5, 3.5))
    for label, (steps, rates) in curves.items():
        steps, rates = np.asarray(steps), np.asarray(rates)
        if steps.ndim != 1 or steps.shape != rates.shape:
            raise ValueError(
                f"{where}: curve {label!r} needs 1-D steps and rates of equal length, got "
                f"shapes {steps.shape} and {rates.shape}"
            )
        ax.plot(steps, rates, label=label)
    ax.legend(fontsize="small")
    ax.set(xlabel="training step", ylabel="learning rate", title="Learning-rate schedules")
    return ax


def plot_label_smoothing(targets: ArrayLike, ax: Axes | None = None) -> Axes:
    """Heatmap of target distributions ``targets`` ``(n, vocab)``, one row per target token.

    With label smoothing the correct class keeps most of the mass and the rest is spread over
    the other classes, so every row shows one bright cell on a faint background.
    """
    where = "plot_label_smoothing"
    targets = _matrix(targets, 2, "targets", where, "(n, vocab)")
    ax = _axes(ax, (6, 3))
    # A power-law colour scale keeps the small smoothed probabilities visible next to the peak.
    norm = PowerNorm(gamma=0.3, vmin=0, vmax=max(float(targets.max()), 1e-12))
    image = ax.imshow(targets, aspect="auto", cmap="magma", norm=norm, interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, label="target probability (power scale)")
    ax.set(xlabel="vocabulary id", ylabel="example", title="Smoothed target distributions")
    return ax


def plot_curves(
    curves: Mapping[str, Sequence[float]],
    xlabel: str,
    ylabel: str,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Line plot of several value sequences ``{label: values}``, e.g. losses or BLEU per epoch.

    The x axis counts from 1 (epoch 1, evaluation 1, ...).
    """
    where = "plot_curves"
    _require_curves(curves, where)
    ax = _axes(ax, (6, 3.5))
    for label, values in curves.items():
        values = np.asarray(values, dtype=float)
        if values.ndim != 1:
            raise ValueError(
                f"{where}: curve {label!r} must be a 1-D list of numbers, got shape {values.shape}"
            )
        ax.plot(np.arange(1, len(values) + 1), values, marker="o", markersize=3, label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize="small")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title or f"{ylabel} per {xlabel}")
    return ax
