"""Draw the README's figures into ``benchmarks/figures/`` (CPU only, a few seconds).

* ``positional_encoding.png``: the sinusoidal positional encoding of 100 positions at
  ``d_model = 128`` (:func:`transformer_ref.numpy.positional.positional_encoding`).
* ``translator_attention.png``: what the chapter 10 translator shipped with the course
  (``solutions/ch10_translation/multi30k_small.pt``) attends to while it translates one German
  sentence. :func:`transformer_ref.figures.attention_maps.attention_maps` translates the sentence
  with beam search (beam 4, length penalty 0.6) and records the weights of one teacher-forced pass
  over the sentence and its translation, as chapter 10's ``show_attention`` does. The figure
  shows the cross-attention of the last decoder layer, one panel per head: columns are the
  German BPE tokens, and each row is the English token that decoder position produces (so the
  row of "dog" shows where the model looked while writing "dog").

The third figure of the README, ``attention_scaling.png``, is a measurement rather than a
drawing: ``benchmarks/attention_scaling.py`` writes it into the same folder.

Both figures are deterministic: the same checkpoint and sentence give the same picture.

Examples::

    python benchmarks/readme_figures.py
    python benchmarks/readme_figures.py --out /tmp/figures --sentence "Zwei Hunde spielen."
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from tokenizers import Tokenizer

from transformer_ref.figures.attention_maps import attention_maps
from transformer_ref.figures.plots import plot_attention_grid, plot_positional_encoding
from transformer_ref.numpy.positional import positional_encoding
from transformer_ref.training.checkpoint import load_model

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "figures"
CHECKPOINT = ROOT / "solutions" / "ch10_translation" / "multi30k_small.pt"
DEFAULT_SENTENCE = "Ein Hund rennt über die Wiese."
DPI = 120


def draw_positional_encoding(path: Path, positions: int = 100, d_model: int = 128) -> Path:
    """Heatmap of the ``(positions, d_model)`` encoding, saved to ``path``."""
    ax = plot_positional_encoding(positional_encoding(positions, d_model))
    ax.set_title(f"Sinusoidal positional encoding ({positions} positions, d_model = {d_model})")
    ax.figure.savefig(path, dpi=DPI)
    plt.close(ax.figure)
    return path


def draw_translator_attention(path: Path, sentence: str) -> tuple[Path, str, np.ndarray]:
    """Cross-attention of the last decoder layer, one panel per head, saved to ``path``.

    Returns ``(path, translation, weights)`` with ``weights`` ``(heads, T, S)``: ``S`` counts
    the source tokens (EOS included), ``T`` the output tokens (the translation's and EOS).
    """
    model, stored = load_model(CHECKPOINT, "cpu")
    maps = attention_maps(model, Tokenizer.from_str(stored["tokenizer"]), sentence)
    weights = maps.cross[-1]
    fig = plot_attention_grid(
        weights[None], maps.output_tokens, maps.source_tokens,
        title=f"Cross-attention of the last decoder layer: “{sentence}” → “{maps.translation}”",
    )
    for head, ax in enumerate(fig.axes[: weights.shape[0]]):  # the colour bar comes after
        ax.set_title(f"head {head + 1}", fontsize="medium")
        ax.set_xlabel("German source (BPE)")
    fig.axes[0].set_ylabel("English output token")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path, maps.translation, weights


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Write the figures; return their paths, the translation and the cross-attention."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the PNGs")
    parser.add_argument("--sentence", default=DEFAULT_SENTENCE,
                        help=f"German sentence to translate (default: {DEFAULT_SENTENCE!r})")
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    encoding_png = draw_positional_encoding(args.out / "positional_encoding.png")
    attention_png, translation, weights = draw_translator_attention(
        args.out / "translator_attention.png", args.sentence
    )
    print(f"translation: {args.sentence} -> {translation}")
    for path in (encoding_png, attention_png):
        print(f"wrote {path}")
    return {
        "figures": [encoding_png, attention_png],
        "translation": translation,
        "cross_attention": weights,
    }


if __name__ == "__main__":
    main()
