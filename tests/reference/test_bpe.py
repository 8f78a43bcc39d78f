"""The reference byte-pair encoding: the stated rules on small corpora worked out by hand."""

from __future__ import annotations

import pytest

from transformer_ref.data.bpe import bpe_decode, bpe_encode, learn_bpe, merge_pair
from transformer_ref.data.words import split_words


def test_words_keep_their_leading_whitespace_and_join_back():
    text = "  Ein Hund\trennt.  "
    assert split_words(text) == ["  Ein", " Hund", "\trennt.", "  "]
    assert "".join(split_words(text)) == text


def test_merging_is_left_to_right_and_non_overlapping():
    assert merge_pair(list("aaaa"), ("a", "a")) == ["aa", "aa"]
    assert merge_pair(list("aaa"), ("a", "a")) == ["aa", "a"]


def test_learning_counts_inside_words_and_breaks_ties_by_the_smallest_pair():
    assert learn_bpe(["zz yy"], 1) == [(" ", "y")]  # three pairs occur once each
    assert learn_bpe(["x x x x x"], 3) == [(" ", "x")]  # then no word has two symbols
    assert learn_bpe(["low lower lowest"], 3) == [("l", "o"), ("lo", "w"), (" ", "low")]


@pytest.mark.parametrize("text", ["", "  ", "Ein Hund rennt.", "über  ein\tHund.\n", "lowest"])
def test_decoding_gives_the_text_back(text):
    merges = learn_bpe(["low lower lowest", "newer wider", "Ein Hund rennt."], 20)
    assert bpe_decode(bpe_encode(text, merges)) == text


def test_encoding_applies_the_earliest_merge_first():
    assert bpe_encode("abc", [("b", "c"), ("a", "b")]) == ["a", "bc"]
    assert bpe_encode("abc", [("a", "b"), ("b", "c")]) == ["ab", "c"]
    assert bpe_encode("abc a", [("a", " ")]) == ["a", "b", "c", " ", "a"]  # never across words
