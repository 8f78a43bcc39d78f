"""build_model: ``make_model`` plus the choice of positional encoding, for training runs.

``make_model`` (chapter 8) always adds the paper's sinusoids. Training runs may instead learn
one embedding per position, as GPT-2 and BERT do; the paper tried both and "found that the two
versions produced nearly identical results" (section 3.5, Table 3 row E). :func:`build_model`
builds either, and checkpoints, the training command (``--set positions=learned``) and the
decoders rebuild and run both.
"""

from __future__ import annotations

from typing import Any

from transformer_ref.model.encoder_decoder import EncoderDecoder
from transformer_ref.model.learned_positional import LearnedPositionalEncoding
from transformer_ref.model.make_model import make_model

POSITIONS = ("sinusoidal", "learned")


def build_model(
    src_vocab: int, tgt_vocab: int, *, positions: str = "sinusoidal", **options: Any
) -> EncoderDecoder:
    """``make_model(src_vocab, tgt_vocab, **options)`` with the positions chosen.

    Args:
        src_vocab, tgt_vocab, options: as for :func:`transformer_ref.model.make_model.make_model`.
        positions: ``"sinusoidal"`` (the paper; a fixed table) or ``"learned"`` (a trained
            table :class:`~transformer_ref.model.learned_positional.LearnedPositionalEncoding` of
            ``max_len`` rows; rows beyond the longest training sequence stay untrained, so keep
            ``max_len`` near that length).

    Returns:
        The model. A learned-position model's ``config`` also holds ``positions="learned"``,
        so ``build_model(**model.config)`` rebuilds either kind (and ``make_model(**config)``
        still rebuilds a sinusoidal one).
    """
    if positions not in POSITIONS:
        raise ValueError(f"build_model: positions must be one of {POSITIONS}, got {positions!r}")
    model = make_model(src_vocab, tgt_vocab, **options)
    if positions == "learned":
        config = model.config
        model.pos_encoding = LearnedPositionalEncoding(
            config["d_model"], config["dropout"], config["max_len"]
        )
        config["positions"] = positions
    return model
