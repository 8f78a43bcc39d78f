"""What a trained translator attends to while it translates one sentence.

:func:`attention_maps` translates a sentence (beam search by default, or a decoder of your
own), then runs one
teacher-forced pass over the sentence and its own translation with
:func:`~transformer_ref.modules.store_attention` switched on, and returns every layer's and
head's weights with the tokens to label them. :func:`show_attention` draws one kind of them as
a grid, one row of panels per layer and one column per head::

    model, checkpoint = load_model("multi30k_small.pt")
    tok = Tokenizer.from_str(checkpoint["tokenizer"])
    show_attention(model, tok, "Ein Hund rennt über die Wiese.")          # cross-attention
    show_attention(model, tok, "Ein Hund rennt über die Wiese.", "encoder")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure
from tokenizers import Tokenizer
from torch import nn

from transformer_ref.data.tokenizer import decode, encode
from transformer_ref.data.vocab import EOS_ID
from transformer_ref.figures.plots import plot_attention_grid
from transformer_ref.generation.greedy import EXTRA_OUTPUT_TOKENS
from transformer_ref.model.basic_masks import make_src_mask
from transformer_ref.model.targets import make_tgt_mask, shift_right
from transformer_ref.modules import store_attention

# decoder(model, src, src_mask, max_len) -> one list of output ids per source sentence.
Decoder = Callable[[nn.Module, torch.Tensor, torch.Tensor, int], list[list[int]]]

KINDS = {
    "cross": "Cross-attention (English output -> German source)",
    "encoder": "Encoder self-attention (German -> German)",
    "decoder": "Decoder self-attention (English, causal)",
}


@dataclass
class AttentionMaps:
    """Attention weights of one translated sentence, with labels.

    Attributes:
        sentence, translation: the German input and the model's English output.
        source_tokens: the ``S`` source subword tokens, EOS included.
        output_tokens: the ``T`` tokens the decoder produced, EOS included; row ``t`` of a
            decoder map belongs to the position that produced ``output_tokens[t]``.
        input_tokens: the ``T`` tokens the decoder read: BOS, then the output without EOS
            (the keys of decoder self-attention).
        cross: ``(layers, heads, T, S)``.
        encoder: ``(layers, heads, S, S)``.
        decoder: ``(layers, heads, T, T)``, zero above the diagonal.
    """

    sentence: str
    translation: str
    source_tokens: list[str]
    output_tokens: list[str]
    input_tokens: list[str]
    cross: np.ndarray
    encoder: np.ndarray
    decoder: np.ndarray


def _stacked(layers: nn.ModuleList, name: str) -> np.ndarray:
    """``(layers, heads, n_q, n_k)`` weights of the first (only) sentence of the last pass."""
    weights = torch.stack([getattr(layer, name).attn_weights[0] for layer in layers])
    return weights.float().cpu().numpy()  # on a GPU the weights are copied to the host


@torch.no_grad()
def attention_maps(
    model: nn.Module,
    tok: Tokenizer,
    sentence: str,
    *,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    decoder: Decoder | None = None,
) -> AttentionMaps:
    """Translate ``sentence`` with ``model`` (eval mode) and record all its attention weights.

    The translation comes from ``decoder(model, src, src_mask, max_len)`` (one list of ids per
    sentence, such as chapter 10's ``beam_search``), by default the course's batched beam
    search with ``beam_size`` (1: greedy) and ``length_penalty``.
    """
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError(f"attention_maps: sentence must be a non-empty str, got {sentence!r}")
    device = next(model.parameters()).device
    src_ids = encode(tok, sentence)
    src = torch.tensor([src_ids], device=device)
    src_mask = make_src_mask(src)
    max_len = min(len(src_ids) + EXTRA_OUTPUT_TOKENS, model.config["max_len"] - 1)
    if decoder is None:
        # Imported here: the course's batched beam search is chapter 10's answer, which a
        # class's learners do not see while the chapter is open (they pass their own).
        from transformer_ref.translate import batch_decoder

        decoder = batch_decoder(beam_size, length_penalty)
    out_ids = decoder(model, src, src_mask, max_len)[0]
    tgt_out = torch.tensor([out_ids + [EOS_ID]], device=device)
    tgt_in = shift_right(tgt_out)
    store_attention(model)
    try:
        model(src, tgt_in, src_mask, make_tgt_mask(tgt_in))
        maps = AttentionMaps(
            sentence=sentence,
            translation=decode(tok, out_ids),
            source_tokens=[tok.id_to_token(i) for i in src_ids],
            output_tokens=[tok.id_to_token(i) for i in tgt_out[0].tolist()],
            input_tokens=[tok.id_to_token(i) for i in tgt_in[0].tolist()],
            cross=_stacked(model.decoder.layers, "cross_attn"),
            encoder=_stacked(model.encoder.layers, "self_attn"),
            decoder=_stacked(model.decoder.layers, "self_attn"),
        )
    finally:
        store_attention(model, False)
    return maps


def show_attention(
    model: nn.Module,
    tok: Tokenizer,
    sentence: str,
    kind: str = "cross",
    *,
    beam_size: int = 4,
    decoder: Decoder | None = None,
) -> Figure:
    """Translate ``sentence`` and draw one kind of attention, every layer and head.

    Args:
        model, tok: a translator in eval mode and its tokenizer.
        sentence: the German sentence.
        kind: ``"cross"`` (output tokens against source tokens), ``"encoder"`` or
            ``"decoder"`` (self-attention).
        beam_size: beam for the translation (1: greedy).
        decoder: decodes instead of the course's beam search (see :func:`attention_maps`).

    Returns:
        The figure (see :func:`~transformer_ref.figures.plots.plot_attention_grid`); the title holds
        the sentence and its translation.
    """
    if kind not in KINDS:
        raise ValueError(f"show_attention: kind must be one of {sorted(KINDS)}, got {kind!r}")
    maps = attention_maps(model, tok, sentence, beam_size=beam_size, decoder=decoder)
    rows = maps.source_tokens if kind == "encoder" else maps.output_tokens
    columns = maps.input_tokens if kind == "decoder" else maps.source_tokens
    fig = plot_attention_grid(getattr(maps, kind), rows, columns,
                              title=f"{KINDS[kind]}: “{maps.sentence}” → “{maps.translation}”")
    panels = [ax for ax in fig.axes if ax.images]
    for ax in panels:
        if ax.get_xlabel():
            ax.set_xlabel("German source" if kind != "decoder" else "English read so far")
        if ax.get_ylabel():
            ax.set_ylabel("English output" if kind != "encoder" else "German source")
    return fig
