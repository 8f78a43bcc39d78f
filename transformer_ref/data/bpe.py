"""Byte-pair encoding written out: learn merges from text, encode with them, decode.

The rules (the ones chapter 10's exercise states):

- **Words.** :func:`transformer_ref.data.words.split_words` cuts a text into chunks, each a
  run of whitespace followed by a run of non-whitespace (``" a"``, ``"  dog."``), plus
  trailing whitespace as a chunk of its own; ``"".join(split_words(t)) == t``. Pairs are
  counted and merged inside a chunk only.
- **Learning.** Every chunk starts as its characters. Each step counts every adjacent pair of
  symbols in every chunk of every text (overlapping pairs all count: ``"aaa"`` holds
  ``("a", "a")`` twice), picks the most frequent pair, breaking ties by the smallest pair in
  Python's order of ``(left, right)`` string tuples, records it, and merges it everywhere
  (left to right, non-overlapping). It stops after ``num_merges`` merges or when no chunk has
  two symbols left.
- **Encoding.** Each chunk starts as its characters; while some adjacent pair is a learnt
  merge, the pair learnt earliest is merged everywhere in the chunk (left to right). The
  tokens are the symbols of all chunks in order, so ``"".join(tokens)`` is the text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from transformer_ref.data.words import split_words


def merge_pair(symbols: Sequence[str], pair: tuple[str, str]) -> list[str]:
    """``symbols`` with every occurrence of ``pair`` merged into one symbol, left to right."""
    merged: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            merged.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return merged


def learn_bpe(texts: Sequence[str], num_merges: int) -> list[tuple[str, str]]:
    """The merges learnt from ``texts``, in the order they were learnt (at most ``num_merges``).

    Args:
        texts: the training texts (for chapter 10, captions).
        num_merges: how many merges to learn at most.

    Returns:
        ``[(left, right), ...]``: merge ``i`` joins the symbols ``left`` and ``right``.
    """
    words = Counter(word for text in texts for word in split_words(text))
    pieces = {word: list(word) for word in words}
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges:
        counts: Counter[tuple[str, str]] = Counter()
        for word, frequency in words.items():
            symbols = pieces[word]
            for pair in zip(symbols, symbols[1:], strict=False):
                counts[pair] += frequency
        if not counts:
            break
        best = min(counts, key=lambda pair: (-counts[pair], pair))
        merges.append(best)
        for word in words:
            pieces[word] = merge_pair(pieces[word], best)
    return merges


def bpe_encode(text: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    """The tokens of ``text`` under ``merges`` (learnt order = priority); they join to ``text``."""
    rank = {tuple(pair): i for i, pair in reversed(list(enumerate(merges)))}
    tokens: list[str] = []
    for word in split_words(text):
        symbols = list(word)
        while len(symbols) > 1:
            ranked = [pair for pair in zip(symbols, symbols[1:], strict=False) if pair in rank]
            if not ranked:
                break
            symbols = merge_pair(symbols, min(ranked, key=rank.__getitem__))
        tokens.extend(symbols)
    return tokens


def bpe_decode(tokens: Sequence[str]) -> str:
    """The text of ``tokens``: their concatenation."""
    return "".join(tokens)
