"""Translate German sentences into English with a trained Multi30k checkpoint.

From a shell::

    python -m transformer_ref.translate --checkpoint runs/multi30k/best.pt \\
        "Ein Hund rennt über die Wiese." "Zwei Kinder spielen im Sand."

prints one English translation per line, in the order given. ``--beam 1`` decodes greedily;
``--device auto`` (the default) uses a CUDA GPU when one is visible.

From Python, :func:`translate_sentences` does the same with a model and tokenizer in memory.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from tokenizers import Tokenizer
from torch import nn

from transformer_ref.checkpoint import load_model
from transformer_ref.decoding import beam_search, greedy_decode
from transformer_ref.device import resolve_device
from transformer_ref.masks import make_src_mask
from transformer_ref.tokenizer import check_special_ids, decode, encode_batch
from transformer_ref.validation import require_int
from transformer_ref.vocab import PAD_ID

# Outputs may be somewhat longer than their sources; this many extra tokens is ample for
# Multi30k captions.
EXTRA_OUTPUT_TOKENS = 50


def translate_sentences(
    model: nn.Module,
    tok: Tokenizer,
    sentences: Sequence[str],
    *,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    max_len: int | None = None,
    batch_size: int = 64,
) -> list[str]:
    """Translate raw sentences with ``model`` (in eval mode, on any device).

    Args:
        model: an encoder–decoder trained on ids from ``tok``.
        tok: the tokenizer stored with the model.
        sentences: untokenised source sentences.
        beam_size: 1 decodes greedily, more runs :func:`~transformer_ref.decoding.beam_search`.
        length_penalty: GNMT ``alpha`` for beam search.
        max_len: most tokens generated per sentence; default: source length + 50, limited by
            the model's positional encoding.
        batch_size: sentences decoded together.

    Returns:
        One detokenised translation per sentence, in the input order.
    """
    where = "translate_sentences"
    beam_size = require_int(beam_size, "beam_size", where, minimum=1)
    batch_size = require_int(batch_size, "batch_size", where, minimum=1)
    if max_len is not None:
        max_len = require_int(max_len, "max_len", where, minimum=1)
    device = next(model.parameters()).device
    ids = encode_batch(tok, sentences)
    limit = getattr(model, "config", {}).get("max_len", 5000) - 1
    # Decoding sentences of similar length together wastes less work on padding.
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    results: list[str] = [""] * len(ids)
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        width = max(len(ids[i]) for i in chosen)
        src = torch.full((len(chosen), width), PAD_ID, dtype=torch.long)
        for row, i in enumerate(chosen):
            src[row, : len(ids[i])] = torch.tensor(ids[i])
        src = src.to(device)
        src_mask = make_src_mask(src)
        steps = min(max_len or width + EXTRA_OUTPUT_TOKENS, limit)
        if beam_size == 1:
            outputs = greedy_decode(model, src, src_mask, steps)
        else:
            outputs = beam_search(
                model, src, src_mask, steps, beam_size=beam_size, length_penalty=length_penalty
            )
        for i, out in zip(chosen, outputs, strict=True):
            results[i] = decode(tok, out)
    return results


def load_translator(path: str | Path, device: torch.device) -> tuple[nn.Module, Tokenizer]:
    """Model (eval mode, on ``device``) and tokenizer from a Multi30k checkpoint.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not a checkpoint, or holds no tokenizer (a synthetic task).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {path}; train one with "
            f"`python -m transformer_ref.train --task multi30k` and pass the .pt file it writes"
        )
    try:
        model, checkpoint = load_model(path, device)
    except (pickle.UnpicklingError, RuntimeError, KeyError, EOFError) as error:
        # torch's own message here is long and suggests unsafe loading; name the cause only.
        raise ValueError(
            f"{path} is not a readable checkpoint (torch.load failed with "
            f"{type(error).__name__}); pass a .pt file written by transformer_ref training"
        ) from error
    if not checkpoint.get("tokenizer"):
        raise ValueError(
            f"{path} holds a model for the task {checkpoint.get('task')!r} without a tokenizer, "
            f"so it cannot translate text; use a checkpoint trained with "
            f"`python -m transformer_ref.train --task multi30k`"
        )
    tok = Tokenizer.from_str(checkpoint["tokenizer"])
    check_special_ids(tok)
    return model, tok


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_ref.translate",
        description="Translate German sentences into English with a trained checkpoint.",
    )
    parser.add_argument("sentences", nargs="+", help="German sentences (quote each one)")
    parser.add_argument("--checkpoint", required=True, type=Path, help="a Multi30k .pt file")
    parser.add_argument("--beam", type=_positive_int, default=4, help="beam size (1 = greedy)")
    parser.add_argument(
        "--length-penalty", type=float, default=0.6, help="GNMT length penalty alpha"
    )
    parser.add_argument(
        "--max-len", type=_positive_int, default=None, help="most tokens per translation"
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m transformer_ref.translate``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        device = resolve_device(args.device)
        model, tok = load_translator(args.checkpoint, device)
        translations = translate_sentences(
            model,
            tok,
            args.sentences,
            beam_size=args.beam,
            length_penalty=args.length_penalty,
            max_len=args.max_len,
        )
    except (FileNotFoundError, ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for line in translations:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
