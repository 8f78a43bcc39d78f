"""Turn a finished Multi30k training run into the translator chapter 10 ships, and score it.

Reads ``RUN/checkpoint.pt``, saves the model in float16 without optimizer state (with its
tokenizer, step and the figures below as its metrics) to ``--out``, then scores the saved file
exactly as a user would load it:

* test_2016_flickr with beam 4 (length penalty 0.6): sacreBLEU cased and lowercased, both on
  detokenised text, with their signatures;
* the validation set with beam 4;
* greedy decoding of the first 200 test sentences (``first_200_test_bleu_greedy``), the
  figure a test recomputes to check that the shipped file still scores what it says.

Translation goes through :func:`transformer_ref.translate.translate_sentences`, the function
behind ``python -m transformer_ref.translate``::

    python benchmarks/ship_translator.py runs/multi30k-cpu-long
    python benchmarks/ship_translator.py runs/multi30k-cpu-long --out /tmp/model.pt

Needs Multi30k in ``MULTI30K_DIR`` (see :mod:`transformer_ref.data.datasets`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from sacrebleu.metrics import BLEU

from transformer_ref.data.datasets import load_multi30k, multi30k_dir
from transformer_ref.training.checkpoint import load_model, save_checkpoint
from transformer_ref.translate import load_translator, translate_sentences

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "solutions" / "ch10_translation" / "multi30k_small.pt"
FIRST = 200


def bleu(hypotheses: list[str], references: list[str], lowercase: bool = False) -> BLEU:
    """sacreBLEU's corpus score (cased unless ``lowercase``) with its signature attached."""
    metric = BLEU(lowercase=lowercase)
    result = metric.corpus_score(hypotheses, [references])
    result.signature = str(metric.get_signature())
    return result


def score(path: Path) -> dict[str, Any]:
    """The figures of the translator saved at ``path`` (see the module docstring)."""
    model, tok = load_translator(path, torch.device("cpu"))
    data = multi30k_dir()
    test = load_multi30k("test_2016_flickr", data)
    val = load_multi30k("val", data)
    figures: dict[str, Any] = {}
    started = time.perf_counter()
    test_hyps = translate_sentences(model, tok, [de for de, _ in test], beam_size=4)
    figures["test_seconds_beam4"] = time.perf_counter() - started
    cased = bleu(test_hyps, [en for _, en in test])
    lower = bleu(test_hyps, [en for _, en in test], lowercase=True)
    val_hyps = translate_sentences(model, tok, [de for de, _ in val], beam_size=4)
    first = translate_sentences(model, tok, [de for de, _ in test[:FIRST]], beam_size=1)
    figures.update({
        "test_2016_flickr_bleu": cased.score,
        "test_2016_flickr_bleu_lowercase": lower.score,
        "bleu_signature": cased.signature,
        "bleu_signature_lowercase": lower.signature,
        "val_bleu": bleu(val_hyps, [en for _, en in val]).score,
        "first_200_test_bleu_greedy": bleu(first, [en for _, en in test[:FIRST]]).score,
        "beam_size": 4,
        "length_penalty": 0.6,
    })
    return figures


def ship(run: Path, out: Path) -> dict[str, Any]:
    """Save ``run``'s model in float16 to ``out``, score it, and store the figures in it."""
    model, checkpoint = load_model(run / "checkpoint.pt", "cpu")
    history = json.loads((run / "metrics.json").read_text()).get("history", [])
    kept = {"task": checkpoint["task"], "tokenizer": checkpoint["tokenizer"],
            "step": checkpoint["step"]}
    half = model.half()  # one call keeps the shared embedding table shared
    save_checkpoint(out, half, **kept)
    figures = score(out)
    figures["history"] = history
    save_checkpoint(out, half, **kept, metrics=figures)
    figures["megabytes"] = out.stat().st_size / 1e6
    figures["parameters"] = sum(p.numel() for p in model.parameters())
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a training run folder (checkpoint.pt, "
                                               "metrics.json)")
    parser.add_argument("--out", type=Path, default=SHIPPED, help=f"default: {SHIPPED}")
    args = parser.parse_args(argv)
    figures = ship(args.run, args.out)
    print(f"wrote {args.out}: {figures['megabytes']:.1f} MB, "
          f"{figures['parameters'] / 1e6:.2f}M parameters (float16)")
    print(f"test2016, beam 4: sacreBLEU {figures['test_2016_flickr_bleu']:.2f} cased "
          f"({figures['bleu_signature']}), {figures['test_2016_flickr_bleu_lowercase']:.2f} "
          f"lowercased ({figures['bleu_signature_lowercase']}); "
          f"{figures['test_seconds_beam4']:.0f} s to translate")
    print(f"validation, beam 4: {figures['val_bleu']:.2f}; first {FIRST} test sentences, "
          f"greedy: {figures['first_200_test_bleu_greedy']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
