"""Cutting a text into the words byte-pair encoding works inside (chapter 10's own BPE)."""

from __future__ import annotations

import re

WORD = re.compile(r"\s*\S+|\s+")


def split_words(text: str) -> list[str]:
    """The chunks of ``text``: each run of whitespace with the word after it (``" dog."``), and
    trailing whitespace on its own; ``"".join(split_words(text)) == text``."""
    return WORD.findall(text)
