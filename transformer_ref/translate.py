"""Translate German sentences into English with a trained Multi30k checkpoint.

From a shell::

    python -m transformer_ref.translate --checkpoint runs/multi30k/checkpoint.pt \\
        "Ein Hund rennt über die Wiese." "Zwei Kinder spielen im Sand."
    python -m transformer_ref.translate --checkpoint model.pt --input test.de > test.hyp
    zcat test_2016_flickr.de.gz | python -m transformer_ref.translate --checkpoint model.pt

prints one English translation per sentence (per input line), in the order given; an empty
input line gives an empty output line, so the output lines up with a reference file for
``sacrebleu``. Sentences are decoded in length-sorted batches (``--batch-size``) with the
batched beam search (``--beam 1`` decodes greedily); ``--device auto`` (the default) uses a
CUDA GPU when one is visible.

From Python, :func:`translate_sentences` does the same with a model and tokenizer in memory.
"""

from __future__ import annotations

import argparse
import functools
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from tokenizers import Tokenizer
from torch import nn

from transformer_ref.data.tokenizer import check_special_ids, decode, encode_batch
from transformer_ref.generation.batch_translation import Decoder, translate_batched
from transformer_ref.generation.cached_beam import cached_beam_search
from transformer_ref.generation.greedy import EXTRA_OUTPUT_TOKENS
from transformer_ref.generation.kv_cache import cached_greedy_decode
from transformer_ref.training.checkpoint import load_model
from transformer_ref.training.device import resolve_device
from transformer_ref.validation import require_int


def batch_decoder(beam_size: int, length_penalty: float = 0.6) -> Decoder:
    """Greedy decoding for ``beam_size == 1``, else the batched beam search with these options.

    Both keep a key/value cache (:mod:`transformer_ref.generation.kv_cache`) for models that
    allow it.
    """
    beam_size = require_int(beam_size, "beam_size", "batch_decoder", minimum=1)
    if beam_size == 1:
        return cached_greedy_decode
    return functools.partial(cached_beam_search, beam_size=beam_size,
                             length_penalty=length_penalty)


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
        max_len: most tokens generated per sentence; default: the longest source's length
            + 50, limited by the model's positional encoding.
        batch_size: sentences decoded together (in length-sorted batches).

    Returns:
        One detokenised translation per sentence, in the input order; a blank sentence
        gives "".
    """
    where = "translate_sentences"
    if max_len is not None:
        max_len = require_int(max_len, "max_len", where, minimum=1)
    if isinstance(sentences, str):
        raise TypeError(f"{where}: sentences must be a list of str, got a single str; wrap it "
                        f"in a list")
    results = [""] * len(sentences)
    # Blank lines stay blank, so the output lines up with its input line by line.
    kept = [i for i, sentence in enumerate(sentences) if sentence.strip()]
    if not kept:
        return results
    ids = encode_batch(tok, [sentences[i] for i in kept])
    limit = getattr(model, "config", {}).get("max_len", 5000) - 1
    steps = min(max_len or max(map(len, ids)) + EXTRA_OUTPUT_TOKENS, limit)
    outputs = translate_batched(model, ids, steps, batch_size,
                                decoder=batch_decoder(beam_size, length_penalty))
    for i, out in zip(kept, outputs, strict=True):
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
    parser.add_argument("sentences", nargs="*",
                        help="German sentences (quote each one); without them the sentences "
                             "are read from --input, or from standard input, one per line")
    parser.add_argument("--input", type=Path, default=None, metavar="FILE",
                        help="read the sentences from FILE, one per line ('-': standard input)")
    parser.add_argument("--checkpoint", required=True, type=Path, help="a Multi30k .pt file")
    parser.add_argument("--beam", type=_positive_int, default=4, help="beam size (1 = greedy)")
    parser.add_argument(
        "--length-penalty", type=float, default=0.6, help="GNMT length penalty alpha"
    )
    parser.add_argument(
        "--max-len", type=_positive_int, default=None, help="most tokens per translation"
    )
    parser.add_argument("--batch-size", type=_positive_int, default=64,
                        help="sentences decoded together (default 64)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    return parser


def read_sentences(args: argparse.Namespace) -> list[str]:
    """The sentences to translate: the arguments, the ``--input`` file or standard input.

    Raises:
        ValueError: both sentences and ``--input`` were given.
        FileNotFoundError: the ``--input`` file does not exist.
    """
    if args.sentences and args.input is not None:
        raise ValueError("give sentences as arguments or --input FILE, not both")
    if args.sentences:
        return list(args.sentences)
    if args.input is not None and str(args.input) != "-":
        if not args.input.is_file():
            raise FileNotFoundError(f"--input {args.input}: no such file")
        return args.input.read_text(encoding="utf-8").splitlines()
    if args.input is None and sys.stdin.isatty():
        raise ValueError("no sentences to translate: give them as arguments, name a file with "
                         "--input FILE, or pipe lines into standard input")
    return sys.stdin.read().splitlines()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m transformer_ref.translate``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        sentences = read_sentences(args)
        device = resolve_device(args.device)
        model, tok = load_translator(args.checkpoint, device)
        translations = translate_sentences(
            model,
            tok,
            sentences,
            beam_size=args.beam,
            length_penalty=args.length_penalty,
            max_len=args.max_len,
            batch_size=args.batch_size,
        )
    except (FileNotFoundError, ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for line in translations:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
