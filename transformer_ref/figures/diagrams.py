"""Diagrams drawn by code: the Transformer's architecture and multi-head attention.

The figures are drawn from what a model holds, not copied from the paper, so they stay true to
the model they describe: :func:`plot_transformer` reads the number of layers, the widths, the
heads, where the layer norms sit (post-LN as in the paper, or pre-LN), the positional encoding
and the shared tables from a model built by ``make_model`` (or from a configuration dict), and
draws the encoder and decoder stacks with their sub-layers, residual connections, masks and the
memory that cross-attention reads. :func:`plot_multi_head_attention` draws one attention layer
with the shapes of a given example: projection, split into heads, attention per head,
concatenation and the output projection.

Like :mod:`transformer_ref.figures.plots`, each function draws onto the Axes it is given (or a new
one) and returns it; nothing here needs torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

# make_model's defaults: the paper's base model.
DEFAULTS = dict(N=6, d_model=512, d_ff=2048, h=8, norm_first=False, positions="sinusoidal",
                share_embeddings=False, tie_weights=False)
# Keys of a configuration that the architecture figure does not draw (make_model's other
# arguments), so that model.config and a preset's model settings can be passed as they are.
NOT_DRAWN = ("src_vocab", "tgt_vocab", "dropout", "max_len", "fast_attention")

# Colours in the spirit of the paper's Figure 1.
ATTENTION = "#fbd7a5"
FEED_FORWARD = "#c6e6f5"
NORM = "#f2efa4"
EMBEDDING = "#f7cfcf"
OUTPUT = "#ddd3f0"
POSITION = "#e3e3e3"
FRAME = "#f4f4f4"

# Geometry of the architecture figure, in data units (INCH inches each).
INCH = 0.7
BOX_W = 3.0
LINE_H = 0.46  # a box of one line of text
TWO_LINE_H = 0.66
GAP = 0.32
ADD_R = 0.14
COLUMN_SPACING = 5.2
FONT = 8


@dataclass(frozen=True)
class Architecture:
    """What the architecture figure shows.

    Attributes:
        n_encoder, n_decoder: layers in each stack (``n_decoder`` is 0 for an encoder alone).
        d_model, h, d_ff: model width, heads, feed-forward width.
        norm_first: pre-LN (True) or the paper's post-LN (False).
        positions: ``"sinusoidal"`` or ``"learned"``.
        share_embeddings, tie_weights: one table for source and target; the output layer
            uses the target table.
    """

    n_encoder: int
    n_decoder: int
    d_model: int
    h: int
    d_ff: int
    norm_first: bool
    positions: str = "sinusoidal"
    share_embeddings: bool = False
    tie_weights: bool = False


def _from_config(config: Mapping[str, Any]) -> Architecture:
    unknown = set(config) - set(DEFAULTS) - set(NOT_DRAWN)
    if unknown:
        raise ValueError(
            f"plot_transformer: unknown configuration keys {sorted(unknown)}; use make_model's "
            f"argument names ({', '.join(DEFAULTS)})"
        )
    values = {**DEFAULTS, **config}
    for name in ("N", "d_model", "d_ff", "h"):
        value = values[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"plot_transformer: {name} must be a positive int, got {value!r}")
    if values["d_model"] % values["h"]:
        raise ValueError(f"plot_transformer: d_model={values['d_model']} is not divisible by "
                         f"h={values['h']}")
    if values["positions"] not in ("sinusoidal", "learned"):
        raise ValueError(f"plot_transformer: positions must be 'sinusoidal' or 'learned', got "
                         f"{values['positions']!r}")
    return Architecture(values["N"], values["N"], values["d_model"], values["h"],
                        values["d_ff"], bool(values["norm_first"]), values["positions"],
                        bool(values["share_embeddings"]), bool(values["tie_weights"]))


def _read(model: Any, path: str) -> Any:
    value = model
    for name in path.split("."):
        try:
            value = value[int(name)] if name.isdigit() else getattr(value, name)
        except (AttributeError, IndexError, TypeError):
            raise ValueError(
                f"plot_transformer: the model has no {path}; draw a model built by make_model "
                f"(from the course's Encoder, Decoder and EncoderDecoder), or pass a "
                f"configuration dict such as dict(N=6, d_model=512, h=8, d_ff=2048)"
            ) from None
    return value


def _from_model(model: Any) -> Architecture:
    encoder_layers = list(_read(model, "encoder.layers"))
    decoder_layers = list(_read(model, "decoder.layers"))
    if not encoder_layers or not decoder_layers:
        raise ValueError("plot_transformer: the model's encoder or decoder has no layers")
    placements = {bool(_read(layer, "norm_first")) for layer in encoder_layers + decoder_layers}
    if len(placements) > 1:
        raise ValueError("plot_transformer: the model mixes pre-LN and post-LN layers; the "
                         "figure draws one placement of the layer norms")
    first = encoder_layers[0]
    tgt_table = _read(model, "tgt_embed.lut.weight")
    return Architecture(
        n_encoder=len(encoder_layers),
        n_decoder=len(decoder_layers),
        d_model=int(_read(first, "norm1.normalized_shape.0")),
        h=int(_read(first, "self_attn.h")),
        d_ff=int(_read(first, "feed_forward.w_1.out_features")),
        norm_first=placements.pop(),
        # A learned table is trained, so it is a parameter; the sinusoids are a fixed buffer.
        positions="learned" if any(True for _ in _read(model, "pos_encoding").parameters())
        else "sinusoidal",
        share_embeddings=_read(model, "src_embed") is _read(model, "tgt_embed"),
        tie_weights=_read(model, "generator.proj.weight") is tgt_table,
    )


def architecture(source: Any, encoder_only: bool = False) -> Architecture:
    """The :class:`Architecture` of a model (an ``EncoderDecoder``) or of a configuration.

    A configuration is a dict of ``make_model`` arguments (``N``, ``d_model``, ``d_ff``, ``h``,
    ``norm_first``, ``share_embeddings``, ``tie_weights``; missing ones take make_model's
    defaults) and optionally ``positions``. ``encoder_only`` drops the decoder.
    """
    if isinstance(source, Mapping):
        arch = _from_config(source)
    elif hasattr(source, "encoder"):
        arch = _from_model(source)
    else:
        raise ValueError(
            f"plot_transformer: expected a model built by make_model or a configuration dict, "
            f"got {type(source).__name__}"
        )
    if encoder_only:
        arch = Architecture(arch.n_encoder, 0, arch.d_model, arch.h, arch.d_ff,
                            arch.norm_first, arch.positions, False, False)
    return arch


# --------------------------------------------------------------------------- drawing helpers


def _box(ax: Axes, cx: float, bottom: float, text: str, color: str,
         width: float = BOX_W, height: float | None = None, fontsize: float = FONT) -> float:
    """A rounded box whose bottom edge is at ``bottom``; returns its top."""
    height = height or (TWO_LINE_H if "\n" in text else LINE_H)
    ax.add_patch(FancyBboxPatch((cx - width / 2, bottom), width, height,
                                boxstyle="round,pad=0,rounding_size=0.08", facecolor=color,
                                edgecolor="black", linewidth=0.8, zorder=2))
    ax.text(cx, bottom + height / 2, text, ha="center", va="center", fontsize=fontsize,
            zorder=3)
    return bottom + height


def _arrow(ax: Axes, points: Sequence[tuple[float, float]], color: str = "black") -> None:
    """A polyline through ``points`` with an arrowhead at the last one."""
    xs, ys = zip(*points, strict=True)
    if len(points) > 2:
        ax.plot(xs[:-1], ys[:-1], color=color, linewidth=1, zorder=1,
                solid_capstyle="butt")
    ax.annotate("", xy=points[-1], xytext=points[-2],
                arrowprops=dict(arrowstyle="-|>", color=color, linewidth=1, shrinkA=0,
                                shrinkB=0, mutation_scale=9), zorder=1)


def _add(ax: Axes, cx: float, bottom: float) -> float:
    """The ⊕ of a residual addition or of the positional encoding; returns its top."""
    ax.add_patch(Circle((cx, bottom + ADD_R), ADD_R, facecolor="white", edgecolor="black",
                        linewidth=0.8, zorder=2))
    ax.plot([cx - ADD_R * 0.6, cx + ADD_R * 0.6], [bottom + ADD_R] * 2, color="black",
            linewidth=0.8, zorder=3)
    ax.plot([cx, cx], [bottom + ADD_R * 0.4, bottom + ADD_R * 1.6], color="black",
            linewidth=0.8, zorder=3)
    return bottom + 2 * ADD_R


@dataclass(frozen=True)
class _Sublayer:
    text: str
    color: str
    name: str


def _sublayers(arch: Architecture, side: str) -> list[_Sublayer]:
    heads = f"h = {arch.h}"
    ffn = _Sublayer(f"Feed-forward network\nd_ff = {arch.d_ff}, ReLU", FEED_FORWARD, "ffn")
    if side == "encoder":
        return [_Sublayer(f"Multi-head self-attention\n{heads}, mask: source padding",
                          ATTENTION, "self"), ffn]
    return [
        _Sublayer(f"Masked multi-head self-attention\n{heads}, mask: causal + padding",
                  ATTENTION, "self"),
        _Sublayer(f"Multi-head cross-attention\n{heads}, mask: source padding", ATTENTION,
                  "cross"),
        ffn,
    ]


def _stack(ax: Axes, arch: Architecture, side: str, cx: float, y: float) -> tuple[float, dict]:
    """One layer of a stack (with its frame and N label) above ``y``, and the final LayerNorm
    of a pre-LN stack. Returns the stack's top and the vertical centres of its sub-layers."""
    outward = -1 if side == "encoder" else 1  # residuals and labels on the outer side
    residual_x = cx + outward * (BOX_W / 2 + 0.28)
    frame_bottom = y + 0.05
    centres = {}
    for sublayer in _sublayers(arch, side):
        branch = y + GAP * 0.55
        bottom = y + GAP
        if arch.norm_first:
            _arrow(ax, [(cx, y), (cx, bottom)])
            top = _box(ax, cx, bottom, "LayerNorm", NORM)
            bottom = top + GAP
        _arrow(ax, [(cx, top if arch.norm_first else y), (cx, bottom)])
        top = _box(ax, cx, bottom, sublayer.text, sublayer.color)
        centres[sublayer.name] = (bottom + top) / 2
        if arch.norm_first:
            _arrow(ax, [(cx, top), (cx, top + GAP)])
            y = _add(ax, cx, top + GAP)
            join, edge = y - ADD_R, cx + outward * ADD_R
        else:
            _arrow(ax, [(cx, top), (cx, top + GAP)])
            y = _box(ax, cx, top + GAP, "Add & LayerNorm", NORM)
            join, edge = y - LINE_H / 2, cx + outward * BOX_W / 2
        ax.plot([cx], [branch], marker="o", markersize=2.5, color="black", zorder=3)
        _arrow(ax, [(cx, branch), (residual_x, branch), (residual_x, join), (edge, join)])
    frame_top = y + GAP / 2
    half = BOX_W / 2 + 0.48
    ax.add_patch(FancyBboxPatch((cx - half, frame_bottom), 2 * half, frame_top - frame_bottom,
                                boxstyle="round,pad=0,rounding_size=0.15", facecolor=FRAME,
                                edgecolor="#888888", linewidth=1, zorder=0))
    layers = arch.n_encoder if side == "encoder" else arch.n_decoder
    ax.text(cx + outward * (half + 0.12), (frame_bottom + frame_top) / 2,
            f"N = {layers}\nlayers", ha="right" if outward < 0 else "left", va="center",
            fontsize=FONT + 2, fontweight="bold")
    if arch.norm_first:
        _arrow(ax, [(cx, y), (cx, frame_top + GAP)])
        y = _box(ax, cx, frame_top + GAP, "final LayerNorm (pre-LN)", NORM)
    else:
        y = frame_top
        ax.plot([cx, cx], [frame_top - GAP / 2, frame_top], color="black", linewidth=1)
    return y, centres


def _inputs(ax: Axes, arch: Architecture, side: str, cx: float) -> float:
    """Tokens, embedding and positional encoding at the bottom of a column; returns the top."""
    outward = -1 if side == "encoder" else 1
    words = ("source tokens" if side == "encoder" else "target tokens, shifted right (<bos> first)")
    ax.text(cx, 0, words, ha="center", va="bottom", fontsize=FONT)
    shared = ", shared table" if arch.share_embeddings and arch.n_decoder else ""
    label = f"{'Input' if side == 'encoder' else 'Output'} embedding × √d_model"
    label += f"\nd_model = {arch.d_model}{shared}"
    _arrow(ax, [(cx, 0.3), (cx, 0.3 + GAP)])
    top = _box(ax, cx, 0.3 + GAP, label, EMBEDDING)
    _arrow(ax, [(cx, top), (cx, top + GAP)])
    y = _add(ax, cx, top + GAP)
    kind = "sinusoidal" if arch.positions == "sinusoidal" else "learned table"
    centre = cx + outward * 2.3
    _box(ax, centre, y - ADD_R - TWO_LINE_H / 2, f"Positional encoding\n{kind}", POSITION,
         width=2.0, fontsize=FONT - 0.5)
    _arrow(ax, [(centre - outward * 1.0, y - ADD_R), (cx + outward * ADD_R, y - ADD_R)])
    # A short way up, so that the stack's frame clears the positional-encoding box.
    ax.plot([cx, cx], [y, y + 0.25], color="black", linewidth=1)
    return y + 0.25


def _decoder_top(ax: Axes, arch: Architecture, encoder_top: float, decoder_top: float,
                 cross: float) -> float:
    """The memory's path into the decoder's cross-attention (at height ``cross``) and the
    generator and softmax above the decoder stack; returns the drawing's top."""
    decoder_x = COLUMN_SPACING
    # Cross-attention: queries from the decoder below it, keys and values from the memory.
    middle = COLUMN_SPACING / 2
    _arrow(ax, [(0, encoder_top), (0, encoder_top + GAP), (middle, encoder_top + GAP),
                (middle, cross), (decoder_x - BOX_W / 2, cross)])
    ax.text(middle - 0.08, (encoder_top + GAP + cross) / 2, "memory\n(keys, values)",
            rotation=90, ha="right", va="center", fontsize=FONT - 0.5, style="italic")
    ax.text(decoder_x - 0.12, cross - TWO_LINE_H / 2 - 0.06, "queries from below",
            ha="right", va="top", fontsize=FONT - 1.5, style="italic")
    linear = "Linear (the generator)" + ("\nweight = target embedding table"
                                        if arch.tie_weights else "")
    _arrow(ax, [(decoder_x, decoder_top), (decoder_x, decoder_top + GAP)])
    top = _box(ax, decoder_x, decoder_top + GAP, linear, OUTPUT)
    _arrow(ax, [(decoder_x, top), (decoder_x, top + GAP)])
    top = _box(ax, decoder_x, top + GAP, "Softmax", OUTPUT)
    _arrow(ax, [(decoder_x, top), (decoder_x, top + GAP)])
    ax.text(decoder_x, top + GAP + 0.05, "next-token probabilities", ha="center",
            va="bottom", fontsize=FONT)
    return top + GAP + 0.4


def plot_transformer(
    source: Any, ax: Axes | None = None, *, encoder_only: bool = False, title: str | None = None
) -> Axes:
    """Draw the Transformer of a model or a configuration, in the layout of the paper's Figure 1.

    Args:
        source: a model built by ``make_model`` (its layers, widths, heads, layer-norm
            placement, positional encoding and shared tables are read from its modules), or a
            dict of make_model arguments (missing ones: the paper's base model), optionally with
            ``positions="learned"``.
        ax: Axes to draw on (a new figure of the right size when None).
        encoder_only: draw the encoder stack alone, ending in its output (the memory).
        title: figure title (default: the architecture in numbers).

    Returns:
        The Axes. Its texts name every part; the ``N = ...`` label beside each stack gives its
        number of layers.
    """
    arch = architecture(source, encoder_only)
    columns = [("encoder", 0.0)] + ([("decoder", COLUMN_SPACING)] if arch.n_decoder else [])
    right = COLUMN_SPACING + 3.5 if arch.n_decoder else 2.7
    new_figure = ax is None
    if ax is None:
        _, ax = plt.subplots(layout="constrained")
    tops, centres = {}, {}
    for side, cx in columns:
        y = _inputs(ax, arch, side, cx)
        tops[side], centres[side] = _stack(ax, arch, side, cx, y)
    encoder_top = tops["encoder"]
    if arch.n_decoder:
        top = _decoder_top(ax, arch, encoder_top, tops["decoder"], centres["decoder"]["cross"])
    else:
        _arrow(ax, [(0, encoder_top), (0, encoder_top + GAP)])
        ax.text(0, encoder_top + GAP + 0.05, f"encoder output (memory), width {arch.d_model}",
                ha="center", va="bottom", fontsize=FONT)
        top = encoder_top + GAP + 0.4
    stacks = (f"N = {arch.n_encoder} layers" if not arch.n_decoder else
              f"N = {arch.n_encoder} encoder and {arch.n_decoder} decoder layers")
    placement = "pre-LN" if arch.norm_first else "post-LN (as in the paper)"
    what = "The Transformer encoder" if not arch.n_decoder else "The Transformer"
    ax.set_title(title or f"{what}: {stacks}\nd_model = {arch.d_model}, h = {arch.h}, "
                          f"d_ff = {arch.d_ff}\n{placement}, {arch.positions} positions",
                 fontsize=FONT + 2)
    ax.set_xlim(-3.5, right)
    ax.set_ylim(-0.2, top)
    ax.set_aspect("equal")
    ax.axis("off")
    if new_figure:  # the drawing's own size, plus room for the three lines of the title
        ax.figure.set_size_inches((right + 3.5) * INCH, (top + 0.2) * INCH + 0.7)
    return ax


# --------------------------------------------------------------------- multi-head attention

HEAD_COLOURS = plt.get_cmap("tab10").colors
ICON_W, ICON_H = 1.5, 0.9  # a (seq, d_model) matrix
MAX_HEAD_ROWS = 8


def _matrix(ax: Axes, left: float, centre_y: float, label: str, strips: int = 0,
            colour: str = "#bbbbbb", width: float = ICON_W, height: float = ICON_H,
            first_strip: int = 0) -> None:
    """A matrix drawn as a rectangle, its columns coloured by head when ``strips`` > 0."""
    bottom = centre_y - height / 2
    if strips:
        for i in range(strips):
            ax.add_patch(Rectangle((left + i * width / strips, bottom), width / strips, height,
                                   facecolor=HEAD_COLOURS[(first_strip + i) % 10], alpha=0.75,
                                   edgecolor="white", linewidth=0.6, zorder=2))
    else:
        ax.add_patch(Rectangle((left, bottom), width, height, facecolor=colour, zorder=2))
    ax.add_patch(Rectangle((left, bottom), width, height, fill=False, edgecolor="black",
                           linewidth=0.8, zorder=3))
    ax.text(left + width / 2, bottom - 0.08, label, ha="center", va="top", fontsize=FONT)


def _positive_int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"plot_multi_head_attention: {name} must be a positive int, got "
                         f"{value!r}")
    return value


def _draw_projections(ax: Axes, n_q: int, n_k: int | None, d_model: int, h: int) -> None:
    """The input(s) on the left and ``Q``, ``K``, ``V`` with their ``h`` head strips;
    ``n_k`` None: self-attention, one input."""
    qkv_y = {"Q": 3.4, "K": 2.2, "V": 1.0}
    if n_k is None:
        n_k = n_q
        _matrix(ax, 0.0, 2.2, f"X ({n_q}, {d_model})")
        sources = {name: (1.5, 2.2) for name in qkv_y}
    else:
        _matrix(ax, 0.0, 3.4, f"X_q ({n_q}, {d_model})")
        _matrix(ax, 0.0, 1.6, f"X_kv ({n_k}, {d_model})")
        sources = {"Q": (1.5, 3.4), "K": (1.5, 1.6), "V": (1.5, 1.6)}
    for name, y in qkv_y.items():
        length = n_q if name == "Q" else n_k
        _arrow(ax, [sources[name], (2.6, y)])
        middle = (sources[name][1] + y) / 2
        if middle == y:  # a level arrow: the label above it; a slanted one: to its left
            ax.text(2.05, y + 0.06, f"$W^{name}$", ha="center", va="bottom", fontsize=FONT)
        else:
            ax.text(1.95, middle, f"$W^{name}$", ha="right", va="center", fontsize=FONT)
        _matrix(ax, 2.6, y, f"{name} ({length}, {d_model})", strips=h,
                width=ICON_W, height=0.7)


def _draw_head_row(ax: Axes, y: float, row_h: float, head: int, d_k: int) -> None:
    """One head's row at height ``y``: its slices of Q, K, V, its attention, its output."""
    colour = HEAD_COLOURS[head % 10]
    for j, name in enumerate("QKV"):
        ax.add_patch(Rectangle((5.2 + j * 0.34, y - row_h / 2), 0.26, row_h,
                               facecolor=colour, alpha=0.75, edgecolor="black",
                               linewidth=0.6, zorder=2))
        ax.text(5.33 + j * 0.34, y, f"${name}_{{{head + 1}}}$", ha="center", va="center",
                fontsize=FONT - 2, zorder=3)
    _arrow(ax, [(6.22, y), (6.45, y)])
    ax.add_patch(FancyBboxPatch((6.5, y - row_h / 2), 2.9, row_h,
                                boxstyle="round,pad=0,rounding_size=0.06",
                                facecolor=colour, alpha=0.3, edgecolor="black",
                                linewidth=0.8, zorder=2))
    ax.text(7.95, y, f"head {head + 1}: softmax$(Q_{{{head + 1}}} K_{{{head + 1}}}^\\top"
            f"/\\sqrt{{{d_k}}})\\,V_{{{head + 1}}}$", ha="center", va="center",
            fontsize=FONT - 0.5, zorder=3)
    _arrow(ax, [(9.4, y), (9.65, y)])
    ax.add_patch(Rectangle((9.7, y - row_h / 2), 0.3, row_h, facecolor=colour, alpha=0.75,
                           edgecolor="black", linewidth=0.6, zorder=2))


def _draw_merge(ax: Axes, n_q: int, d_model: int, h: int, d_k: int) -> None:
    """``merge_heads`` and ``W^O`` on the right, ending in the output."""
    _arrow(ax, [(10.15, 2.2), (11.15, 2.2)])
    ax.text(10.65, 2.3, "merge_heads", ha="center", va="bottom", fontsize=FONT)
    ax.text(10.65, 2.1, "(concat)", ha="center", va="top", fontsize=FONT - 1)
    _matrix(ax, 11.2, 2.2, f"Concat ({n_q}, {h * d_k})", strips=h)
    _arrow(ax, [(12.75, 2.2), (13.55, 2.2)])
    ax.text(13.15, 2.3, "$W^O$", ha="center", va="bottom", fontsize=FONT)
    ax.text(13.15, 2.1, f"({d_model}, {d_model})", ha="center", va="top", fontsize=FONT - 1)
    _matrix(ax, 13.6, 2.2, f"output ({n_q}, {d_model})", colour="#8c8c8c")


def plot_multi_head_attention(
    seq_len: int, d_model: int, num_heads: int, *, kv_len: int | None = None,
    ax: Axes | None = None, title: str | None = None,
) -> Axes:
    """Draw one multi-head attention layer with the shapes of an example.

    From left to right: the input; ``Q = X W^Q``, ``K``, ``V``, their columns coloured by the
    head they belong to; ``split_heads`` gives each head its ``d_k = d_model / num_heads``
    columns; every head attends on its own; ``merge_heads`` concatenates the heads' outputs;
    ``W^O`` mixes them into the output.

    Args:
        seq_len: query positions ``n_q``.
        d_model: model width; ``num_heads`` must divide it.
        num_heads: heads ``h`` (up to 8 are drawn one by one; more are drawn as 1, 2, 3, ⋮, h).
        kv_len: key/value positions ``n_k`` for cross-attention, whose keys and values come
            from a second input; None: self-attention, one input.
        ax, title: Axes to draw on (new when None) and title.

    Returns:
        The Axes.
    """
    n_q = _positive_int(seq_len, "seq_len")
    d_model = _positive_int(d_model, "d_model")
    h = _positive_int(num_heads, "num_heads")
    if d_model % h:
        raise ValueError(f"plot_multi_head_attention: d_model={d_model} is not divisible by "
                         f"num_heads={h}")
    n_k = n_q if kv_len is None else _positive_int(kv_len, "kv_len")
    d_k = d_model // h
    if ax is None:
        _, ax = plt.subplots(figsize=(15.2 * INCH * 1.05, 5.6 * INCH * 1.05),
                             layout="constrained")
    rows = list(range(h)) if h <= MAX_HEAD_ROWS else [0, 1, 2, None, h - 1]
    top, bottom = 4.2, 0.2
    row_y = [top - (i + 0.5) * (top - bottom) / len(rows) for i in range(len(rows))]
    row_h = min(0.6, 0.8 * (top - bottom) / len(rows))
    _draw_projections(ax, n_q, None if kv_len is None else n_k, d_model, h)
    # split_heads, per-head attention, merge_heads.
    _arrow(ax, [(4.25, 2.2), (5.1, 2.2)])
    ax.text(4.65, 2.3, "split_heads", ha="center", va="bottom", fontsize=FONT)
    ax.text(4.65, 2.1, f"d_k = {d_k}", ha="center", va="top", fontsize=FONT - 1)
    for y, head in zip(row_y, rows, strict=True):
        if head is None:
            ax.text(7.4, y, "⋮", ha="center", va="center", fontsize=FONT + 6)
        else:
            _draw_head_row(ax, y, row_h, head, d_k)
    ax.text(7.95, bottom - 0.05, f"each head: weights ({n_q}, {n_k}), output ({n_q}, {d_k})",
            ha="center", va="top", fontsize=FONT)
    _draw_merge(ax, n_q, d_model, h, d_k)
    kind = "self-attention" if kv_len is None else "cross-attention"
    ax.set_title(title or f"Multi-head {kind}: {h} heads of width d_k = {d_model} / {h} = "
                          f"{d_k}", fontsize=FONT + 2)
    ax.set_xlim(-0.2, 15.2)
    ax.set_ylim(-0.5, 4.5)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax
