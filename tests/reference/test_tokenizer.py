"""The joint BPE tokenizer: special ids, reversible encoding, training data and caching."""

import shutil
import unicodedata

import pytest
from tokenizers import Tokenizer

from transformer_ref.data import tokenizer as tokenizer_module
from transformer_ref.data.datasets import load_multi30k
from transformer_ref.data.tokenizer import (
    decode,
    encode,
    encode_batch,
    load_or_train_tokenizer,
    train_bpe,
)
from transformer_ref.data.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID


@pytest.fixture(scope="module")
def small_pairs(multi30k_dir):
    return load_multi30k("train", multi30k_dir)[:3000]


@pytest.fixture(scope="module")
def tok(small_pairs):
    return train_bpe([s for pair in small_pairs for s in pair], vocab_size=1000)


@pytest.fixture(scope="module")
def train_only_dir(multi30k_dir, tmp_path_factory):
    """A directory holding just the two training files (all the tokenizer needs)."""
    path = tmp_path_factory.mktemp("multi30k")
    for name in ("train.de.gz", "train.en.gz"):
        shutil.copy(multi30k_dir / name, path / name)
    return path


@pytest.fixture(scope="module")
def cache_dir(train_only_dir, tmp_path_factory):
    """A cache holding the tokenizer trained once on the full training split."""
    path = tmp_path_factory.mktemp("cache")
    load_or_train_tokenizer(train_only_dir, 500, path)
    return path


def test_special_tokens_have_fixed_ids(tok):
    for i, token in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(token) == i
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert tok.get_vocab_size() == 1000


def test_round_trip_gives_back_the_sentence(tok, multi30k_dir):
    # Held-out sentences: the tokenizer never saw them.
    sentences = [de for de, _ in load_multi30k("test_2016_flickr", multi30k_dir)[:50]]
    sentences += ["Ein Hund rennt über die Wiese.", 'He said: "don\'t go" (twice), 3.5 km!']
    for sentence in sentences:
        ids = encode(tok, sentence)
        assert ids[-1] == EOS_ID and ids.count(EOS_ID) == 1
        assert BOS_ID not in ids
        if UNK_ID not in ids:
            assert decode(tok, ids) == unicodedata.normalize("NFKC", sentence)
    assert encode_batch(tok, sentences) == [encode(tok, s) for s in sentences]


def test_nfkc_normalisation(tok):
    # The ligature "ﬁ" and a full-width "Ａ" become "fi" and "A".
    assert decode(tok, encode(tok, "ﬁsh Ａ")) == "fish A"


def test_decode_stops_at_eos_and_skips_specials(tok):
    ids = encode(tok, "Ein Hund")
    assert decode(tok, [BOS_ID] + ids + [7, 8, 9]) == "Ein Hund"
    assert decode(tok, ids[:-1] + [PAD_ID, PAD_ID]) == "Ein Hund"


def test_subwords_are_shared_across_languages(tok):
    # One joint vocabulary: frequent words of both languages are single tokens.
    for word in ("▁Mann", "▁man", "▁Hund", "▁dog"):
        assert tok.token_to_id(word) is not None


def test_bad_arguments(tok):
    with pytest.raises(TypeError, match="wrap it in a list"):
        train_bpe("ein satz", 100)
    with pytest.raises(ValueError, match="vocab_size must be at least 64"):
        train_bpe(["a b"], 10)
    with pytest.raises(TypeError, match="text must be a str"):
        encode(tok, [5, 6])


def test_trains_on_the_training_split_and_reuses_the_cache(
    train_only_dir, cache_dir, monkeypatch
):
    seen = []
    real_train = tokenizer_module.train_bpe

    def spy(sentences, vocab_size):
        sentences = list(sentences)
        seen.append((len(sentences), vocab_size))
        # A slice keeps the test fast; what matters is what was passed in.
        return real_train(sentences[:2000], vocab_size)

    monkeypatch.setattr(tokenizer_module, "train_bpe", spy)
    (cached,) = cache_dir.glob("*bpe500-*.json")
    again = load_or_train_tokenizer(train_only_dir, 500, cache_dir)
    assert seen == [], "the cached tokenizer is reused"
    assert again.to_str() == Tokenizer.from_file(str(cached)).to_str()

    load_or_train_tokenizer(train_only_dir, 600, cache_dir)
    assert seen == [(2 * 29_000, 600)], "both sides of every training pair, nothing else"
    assert len(list(cache_dir.glob("*bpe600-*.json"))) == 1


def test_changed_training_data_is_detected(train_only_dir, tmp_path):
    for name in ("train.de.gz", "train.en.gz"):
        shutil.copy(train_only_dir / name, tmp_path / name)
    (tmp_path / "train.en.gz").write_bytes(b"not the real file")
    with pytest.raises(ValueError, match="train.en.gz: checksum mismatch"):
        load_or_train_tokenizer(tmp_path, 500, tmp_path / "cache")


def test_cached_file_loads_as_a_plain_tokenizer(train_only_dir, cache_dir):
    tok = load_or_train_tokenizer(train_only_dir, 500, cache_dir)
    (path,) = cache_dir.glob("*bpe500-*.json")
    again = Tokenizer.from_file(str(path))
    sentence = "Zwei Hunde spielen im Schnee."
    assert encode(again, sentence) == encode(tok, sentence)
    assert decode(again, encode(again, sentence)) == sentence
