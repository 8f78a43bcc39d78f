"""A joint German+English subword (BPE) tokenizer built with Hugging Face ``tokenizers``.

One vocabulary serves both languages (so the model may share or tie its embeddings). The
special tokens sit at fixed ids 0..3 (:data:`transformer_ref.data.vocab.SPECIAL_TOKENS`). The text
is NFKC-normalised, split on whitespace and punctuation, and every space is kept as the marker
``▁`` at the start of the following piece, so decoding puts the spaces back::

    >>> tok = load_or_train_tokenizer()                       # doctest: +SKIP
    >>> ids = encode(tok, "Ein Hund rennt.")                 # doctest: +SKIP
    >>> [tok.id_to_token(i) for i in ids]                    # doctest: +SKIP
    ['▁Ein', '▁Hund', '▁rennt', '.', '<eos>']
    >>> decode(tok, ids)                                     # doctest: +SKIP
    'Ein Hund rennt.'

The tokenizer is learnt on the training split only, so validation and test sentences never
influence it. :func:`load_or_train_tokenizer` caches the result as JSON.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from transformer_ref.data.datasets import (
    load_multi30k,
    multi30k_files,
    sha256_file,
    verify_multi30k,
)
from transformer_ref.data.vocab import EOS_ID, SPECIAL_TOKENS, UNK_ID
from transformer_ref.validation import require_int

DEFAULT_VOCAB_SIZE = 8000
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "transformer_ref"
# Part of the cache key: bump it whenever the recipe in build_tokenizer changes, so that
# tokenizers cached by an older recipe are not reused.
RECIPE_VERSION = "bpe-metaspace-v1"


def build_tokenizer() -> Tokenizer:
    """An untrained BPE tokenizer with this course's normaliser, pre-tokenizer and decoder."""
    tok = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS[UNK_ID]))
    tok.normalizer = normalizers.NFKC()
    # Metaspace turns each space into "▁" glued to the next word; splitting off punctuation
    # afterwards keeps "Hund." from becoming its own word. The decoder reverses both steps.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()]
    )
    tok.decoder = decoders.Metaspace()
    return tok


def train_bpe(sentences: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE) -> Tokenizer:
    """Learn a BPE vocabulary of (at most) ``vocab_size`` tokens from raw sentences.

    Args:
        sentences: untokenised text, one sentence per item (German and English mixed).
        vocab_size: size of the vocabulary including the four special tokens; at least 64.

    Returns:
        A trained ``tokenizers.Tokenizer`` whose ids 0..3 are ``SPECIAL_TOKENS``.
    """
    vocab_size = require_int(vocab_size, "vocab_size", "train_bpe", minimum=64)
    if isinstance(sentences, str):
        raise TypeError(
            "train_bpe: sentences must be an iterable of strings (one per sentence), got a "
            "single str; wrap it in a list"
        )
    tok = build_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False
    )
    tok.train_from_iterator(sentences, trainer=trainer)
    check_special_ids(tok)
    return tok


def check_special_ids(tok: Tokenizer) -> None:
    """Raise ``ValueError`` unless the special tokens have ids 0..3 in the course's order."""
    actual = [tok.token_to_id(token) for token in SPECIAL_TOKENS]
    if actual != list(range(len(SPECIAL_TOKENS))):
        raise ValueError(
            f"tokenizer has special tokens {SPECIAL_TOKENS} at ids {actual}, expected "
            f"{list(range(len(SPECIAL_TOKENS)))}; build it with "
            "transformer_ref.data.tokenizer.train_bpe"
        )


def _cache_key(data_dir: Path, vocab_size: int) -> str:
    digest = hashlib.sha256(RECIPE_VERSION.encode())
    for name in multi30k_files("train"):
        digest.update(sha256_file(data_dir / name).encode())
    return f"multi30k-bpe{vocab_size}-{digest.hexdigest()[:16]}.json"


def load_or_train_tokenizer(
    data_dir: str | Path | None = None,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    cache_dir: str | Path | None = None,
) -> Tokenizer:
    """Return the Multi30k BPE tokenizer, training it on the training split the first time.

    The JSON file in ``cache_dir`` is named after ``vocab_size`` and the checksums of the two
    training files, so a different vocabulary size or different data trains a new tokenizer.

    Args:
        data_dir: the Multi30k directory (default
            :func:`transformer_ref.data.datasets.multi30k_dir`).
        vocab_size: vocabulary size including the special tokens.
        cache_dir: where the JSON is kept (default ``~/.cache/transformer_ref``).
    """
    vocab_size = require_int(vocab_size, "vocab_size", "load_or_train_tokenizer", minimum=64)
    data_dir = verify_multi30k(data_dir, list(multi30k_files("train")))
    cache_dir = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE_DIR
    path = cache_dir / _cache_key(data_dir, vocab_size)
    if path.is_file():
        tok = Tokenizer.from_file(str(path))
        check_special_ids(tok)
        return tok
    pairs = load_multi30k("train", data_dir)
    tok = train_bpe((s for pair in pairs for s in pair), vocab_size)
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Write then rename, so an interrupted run never leaves a truncated cache file behind.
    fd, part = tempfile.mkstemp(dir=cache_dir, suffix=".part")
    os.close(fd)
    try:
        tok.save(part)
        os.replace(part, path)
    finally:
        Path(part).unlink(missing_ok=True)
    return tok


def encode(tok: Tokenizer, text: str) -> list[int]:
    """Token ids of one sentence, ending with ``EOS_ID`` (no BOS).

    Args:
        tok: a tokenizer from :func:`train_bpe` or :func:`load_or_train_tokenizer`.
        text: one untokenised sentence.
    """
    if not isinstance(text, str):
        raise TypeError(f"encode: text must be a str, got {type(text).__name__}")
    return tok.encode(text, add_special_tokens=False).ids + [EOS_ID]


def encode_batch(tok: Tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """:func:`encode` for many sentences at once (faster: the work runs in Rust)."""
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError("encode_batch: texts must be a list of str; for one sentence use encode")
    encodings = tok.encode_batch(list(texts), add_special_tokens=False)
    return [e.ids + [EOS_ID] for e in encodings]


def decode(tok: Tokenizer, ids: Iterable[int]) -> str:
    """Text of an id sequence: stops at the first ``EOS_ID`` and drops the other specials.

    Args:
        tok: the tokenizer that produced the ids.
        ids: a list (or 1-D tensor/array) of ints, with or without BOS/EOS/padding.
    """
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    kept = []
    for i in ids:
        if i == EOS_ID:
            break
        if i >= len(SPECIAL_TOKENS):
            kept.append(int(i))
    return tok.decode(kept, skip_special_tokens=True)
