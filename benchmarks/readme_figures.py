"""Draw the README's figures into ``benchmarks/figures/`` (CPU only, a few seconds).

* ``positional_encoding.png``: the sinusoidal positional encoding of 100 positions at
  ``d_model = 128`` (:func:`transformer_ref.np_positional.positional_encoding`).
* ``translator_attention.png``: what the chapter 10 translator shipped with the course
  (``solutions/ch10_translation/multi30k_small.pt``) attends to while it translates one German
  sentence. The sentence is translated with beam search (beam 4, length penalty 0.6); one
  teacher-forced pass over the sentence and its translation with
  :func:`transformer_ref.modules.store_attention` switched on then records the weights, as in
  chapter 10's attention section. The figure shows the cross-attention of the last decoder
  layer, one panel per head: columns are the German BPE tokens, and each row is the English
  token that decoder position produces (so the row of "dog" shows where the model looked while
  writing "dog").

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
import torch
from tokenizers import Tokenizer

from transformer_ref.checkpoint import load_model
from transformer_ref.decoding import beam_search
from transformer_ref.masks import make_src_mask, make_tgt_mask, shift_right
from transformer_ref.modules import store_attention
from transformer_ref.np_positional import positional_encoding
from transformer_ref.plots import plot_attention_grid, plot_positional_encoding
from transformer_ref.tokenizer import decode, encode
from transformer_ref.vocab import EOS_ID

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


def translate_with_attention(
    sentence: str, checkpoint: Path = CHECKPOINT
) -> tuple[str, np.ndarray, list[str], list[str]]:
    """Translate ``sentence`` and record the last decoder layer's cross-attention.

    Returns:
        ``(translation, weights, source_tokens, output_tokens)``: ``weights`` is a float32
        array ``(heads, T, S)``, where ``S`` counts the source tokens (EOS included) and ``T``
        the output tokens (the translation's tokens and EOS); every row sums to 1.
    """
    model, stored = load_model(checkpoint, "cpu")
    tok = Tokenizer.from_str(stored["tokenizer"])
    src_ids = encode(tok, sentence)
    src = torch.tensor([src_ids])  # (1, S)
    src_mask = make_src_mask(src)
    max_len = min(int(1.5 * src.size(1)) + 10, model.config["max_len"] - 1)
    out_ids = beam_search(model, src, src_mask, max_len, beam_size=4, length_penalty=0.6)[0]

    tgt_out = torch.tensor([out_ids + [EOS_ID]])  # (1, T)
    tgt_in = shift_right(tgt_out)
    store_attention(model)
    with torch.no_grad():
        model(src, tgt_in, src_mask, make_tgt_mask(tgt_in))
    weights = model.decoder.layers[-1].cross_attn.attn_weights[0].float().numpy()  # (h, T, S)
    store_attention(model, False)

    source_tokens = [tok.id_to_token(i) for i in src_ids]
    output_tokens = [tok.id_to_token(i) for i in tgt_out[0].tolist()]
    return decode(tok, out_ids), weights, source_tokens, output_tokens


def draw_translator_attention(path: Path, sentence: str) -> tuple[Path, str, np.ndarray]:
    """Cross-attention of the last decoder layer, one panel per head, saved to ``path``.

    Returns ``(path, translation, weights)`` with ``weights`` ``(heads, T, S)``.
    """
    translation, weights, source_tokens, output_tokens = translate_with_attention(sentence)
    fig = plot_attention_grid(
        weights[None], output_tokens, source_tokens,
        title=f"Cross-attention of the last decoder layer: “{sentence}” → “{translation}”",
    )
    for head, ax in enumerate(fig.axes[: weights.shape[0]]):  # the colour bar comes after
        ax.set_title(f"head {head + 1}", fontsize="medium")
        ax.set_xlabel("German source (BPE)")
        # Slanted rather than upright labels: the BPE word-start mark "▁" stays readable.
        ax.tick_params(axis="x", labelrotation=45)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
    fig.axes[0].set_ylabel("English output token")
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + 0.5)  # room for the slanted labels and the long title
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path, translation, weights


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
