"""The language model chapter 11 ships: one small float16 file in the package, its recorded
figures, and what loading it gives."""

import pytest
import torch

from transformer_ref.training.checkpoint import load_checkpoint
from transformer_ref.training.lm_training import (
    SHIPPED_LM,
    encode_sentences,
    english_sentences,
    evaluate_loss,
    lm_batches,
    load_language_model,
)


def test_shipped_file_is_small_float16_and_in_the_package_only(project_root):
    assert SHIPPED_LM.is_file() and SHIPPED_LM.stat().st_size <= 4e6
    checkpoint = load_checkpoint(SHIPPED_LM)
    floats = [t for t in checkpoint["model"].values() if t.is_floating_point()]
    assert floats and all(t.dtype == torch.float16 for t in floats)
    assert checkpoint["optimizer"] is None
    # One copy in the repository: the chapter loads it from the package.
    copies = [p for folder in ("solutions", "notebooks", "transformer_ref")
              for p in (project_root / folder).rglob("*.pt")
              if p.read_bytes() == SHIPPED_LM.read_bytes()]
    assert copies == [SHIPPED_LM]


def test_recorded_validation_loss_matches_a_fresh_evaluation(multi30k_dir):
    model, tok, record = load_language_model()
    metrics = record["metrics"]
    batches = lm_batches(encode_sentences(tok, english_sentences("val", multi30k_dir)), 2000,
                         shuffle=False)
    assert evaluate_loss(model, batches) == pytest.approx(metrics["val_loss"], abs=1e-3)
    assert metrics["val_loss"] < 3.2 and len(metrics["samples"]) == 4
