"""Corpus BLEU (compared with sacrebleu called directly) and exact-match accuracy."""

import pytest
import sacrebleu
import torch

from transformer_ref.data.vocab import EOS_ID
from transformer_ref.training.metrics import corpus_bleu, exact_match

REFERENCES = [
    "A man in an orange hat starring at something.",
    "Two dogs are playing in the snow.",
    "A little girl climbs into a wooden playhouse.",
]
HYPOTHESES = [
    "A man in an orange hat looks at something.",
    "Two dogs play in the snow.",
    "a small girl is climbing into a playhouse made of wood.",
]


def test_identical_text_scores_100():
    result = corpus_bleu(REFERENCES, REFERENCES)
    assert result.score == pytest.approx(100.0)


def test_partial_match_equals_sacrebleu():
    score, signature = corpus_bleu(HYPOTHESES, REFERENCES)
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    assert score == pytest.approx(expected.score)
    assert 0.0 < score < 100.0


def test_signature_records_the_settings():
    _, signature = corpus_bleu(HYPOTHESES, REFERENCES)
    assert "case:mixed" in signature
    assert "tok:13a" in signature
    assert "nrefs:1" in signature
    assert f"version:{sacrebleu.__version__}" in signature


def test_bleu_is_cased_and_detokenised():
    # Lower-casing a hypothesis costs points: the metric is cased.
    lowered = [h.lower() for h in REFERENCES]
    assert corpus_bleu(lowered, REFERENCES).score < 100.0
    # 13a splits off the final period, so a glued period still matches the reference.
    assert corpus_bleu(["Two dogs are playing in the snow ."], [REFERENCES[1]]).score == (
        pytest.approx(100.0)
    )


def test_bleu_rejects_bad_input():
    with pytest.raises(ValueError, match="got 2 hypotheses but 3 references"):
        corpus_bleu(HYPOTHESES[:2], REFERENCES)
    with pytest.raises(ValueError, match="empty corpus"):
        corpus_bleu([], [])
    with pytest.raises(TypeError, match=r"hypotheses\[0\] is a list.*decode"):
        corpus_bleu([[5, 6, 7]], ["a b c"])
    with pytest.raises(TypeError, match="single str"):
        corpus_bleu("a b c", "a b c")


def test_exact_match_counts_whole_sequences():
    targets = [[4, 5, EOS_ID], [6, EOS_ID], [7, 8, 9, EOS_ID], [4, EOS_ID]]
    # Decoder outputs come without EOS; the second is wrong, the fourth too long.
    predictions = [[4, 5], [7], torch.tensor([7, 8, 9]), [4, 4]]
    assert exact_match(predictions, targets) == pytest.approx(0.5)
    assert exact_match(targets, targets) == 1.0
    # Anything after the first EOS is ignored (padding, or tokens a decoder emitted later).
    assert exact_match([[4, 5, EOS_ID, 0, 0]], [[4, 5, EOS_ID]]) == 1.0
    assert exact_match(["a b", "c"], ["a b", "d"]) == 0.5


def test_exact_match_rejects_bad_input():
    with pytest.raises(ValueError, match="got 1 predictions but 2 targets"):
        exact_match([[4]], [[4], [5]])
    with pytest.raises(ValueError, match="empty corpus"):
        exact_match([], [])
