"""The translator chapter 10 ships: its size, its weights and the figures it records."""

from pathlib import Path

import pytest
import torch

from transformer_ref.data.datasets import load_multi30k
from transformer_ref.training.checkpoint import load_checkpoint
from transformer_ref.training.metrics import corpus_bleu
from transformer_ref.translate import load_translator, translate_sentences

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "solutions" / "ch10_translation" / "multi30k_small.pt"
RELEASED = ROOT / "notebooks" / "ch10_translation" / "multi30k_small.pt"


def test_shipped_file_is_small_float16_and_released_unchanged():
    assert SHIPPED.stat().st_size <= 25e6
    assert RELEASED.read_bytes() == SHIPPED.read_bytes()
    checkpoint = load_checkpoint(SHIPPED)
    floats = [t for t in checkpoint["model"].values() if t.is_floating_point()]
    assert floats and all(t.dtype == torch.float16 for t in floats)
    assert checkpoint["optimizer"] is None and checkpoint["task"] == "multi30k"


def test_recorded_bleu_matches_a_fresh_evaluation(multi30k_dir):
    """The figure stored in the file is what its first 200 test sentences score now."""
    metrics = load_checkpoint(SHIPPED)["metrics"]
    model, tok = load_translator(SHIPPED, torch.device("cpu"))
    test = load_multi30k("test_2016_flickr", multi30k_dir)[:200]
    hyps = translate_sentences(model, tok, [de for de, _ in test], beam_size=1)
    fresh = corpus_bleu(hyps, [en for _, en in test])
    # Other CPUs may round a few logits differently; a tenth of a point allows for that.
    assert fresh.score == pytest.approx(metrics["first_200_test_bleu_greedy"], abs=0.1)
    assert fresh.signature == metrics["bleu_signature"]
    assert metrics["test_2016_flickr_bleu"] >= 0 and metrics["beam_size"] == 4
