"""Train the small language model chapter 11 ships, save it in float16 and record its figures.

The recipe (:data:`RECIPE`) trains an English BPE of 2,000 tokens on the English side of the
Multi30k training split, then a 4-block
:class:`~transformer_ref.model.language_model.LanguageModel` with the next-token loss
(:func:`transformer_ref.training.lm_training.train_language_model`). The saved file (default
``transformer_ref/pretrained/multi30k_en_lm.pt``, where
:func:`transformer_ref.training.lm_training.load_language_model` finds it) holds the float16
weights, the tokenizer, the loss reports and these figures, measured on the saved file itself:

* ``val_loss`` / ``test2016_loss``: the next-token loss in nats per BPE token on the
  validation split and on test_2016_flickr, and their perplexities;
* ``samples``: sentences drawn with temperature 0.8 and top-p 0.9 from a fixed generator.

The run takes about an hour on a shared 2-core machine (56 minutes of training with one torch
thread, as the notebook, while other programs ran)::

    python benchmarks/ship_language_model.py
    python benchmarks/ship_language_model.py --steps 50 --out /tmp/lm.pt   # a quick try

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

from transformer_ref.data.datasets import multi30k_dir
from transformer_ref.data.tokenizer import decode, train_bpe
from transformer_ref.generation.sampling import sample
from transformer_ref.model.language_model import LanguageModel
from transformer_ref.training.lm_training import (
    SHIPPED_LM,
    LMTrainConfig,
    encode_sentences,
    english_sentences,
    evaluate_loss,
    lm_batches,
    load_language_model,
    perplexity,
    prompt_ids,
    save_language_model,
    train_language_model,
)

RECIPE: dict[str, Any] = {
    "bpe_vocab": 2000,
    "model": dict(N=4, d_model=128, d_ff=512, h=4, dropout=0.1, max_len=64, tie_weights=True),
    "train": dict(steps=3000, max_tokens=2000, lr=2e-3, warmup=100, weight_decay=0.1,
                  clip_norm=1.0, eval_every=100, seed=0),
}
PROMPTS = ("", "A man", "Two dogs", "A little girl in a red")
SAMPLING = dict(temperature=0.8, top_p=0.9)


def samples(model: LanguageModel, tok: Any, seed: int = 0) -> list[str]:
    """One sentence per prompt of :data:`PROMPTS`, drawn with :data:`SAMPLING`."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for prompt, ids in zip(PROMPTS, prompt_ids(tok, PROMPTS), strict=True):
        row = sample(model, torch.tensor([ids]), 40, generator=generator, **SAMPLING)[0]
        out.append(f"{prompt} {decode(tok, row[len(ids):])}".strip()
                   if prompt else decode(tok, row))
    return out


def figures(path: Path, data: Path) -> dict[str, Any]:
    """The figures of the model saved at ``path`` (see the module docstring)."""
    model, tok, _ = load_language_model(path)
    found: dict[str, Any] = {}
    for name, split in (("val", "val"), ("test2016", "test_2016_flickr")):
        batches = lm_batches(encode_sentences(tok, english_sentences(split, data)), 2000,
                             shuffle=False)
        found[f"{name}_loss"] = evaluate_loss(model, batches)
        found[f"{name}_perplexity"] = perplexity(found[f"{name}_loss"])
    found["samples"] = samples(model, tok)
    found["sampling"] = dict(SAMPLING)
    return found


def ship(out: Path, steps: int | None = None, threads: int = 1) -> dict[str, Any]:
    """Train with :data:`RECIPE` (``steps`` overrides its step count), save to ``out``,
    measure the saved file and store the figures in it."""
    torch.set_num_threads(threads)
    data = multi30k_dir()
    train_text = english_sentences("train", data)
    tok = train_bpe(train_text, RECIPE["bpe_vocab"])
    train = encode_sentences(tok, train_text)
    val = encode_sentences(tok, english_sentences("val", data))
    config = LMTrainConfig(**{**RECIPE["train"], **({"steps": steps} if steps else {})})
    torch.manual_seed(config.seed)
    model = LanguageModel(tok.get_vocab_size(), **RECIPE["model"])
    started = time.perf_counter()
    reports = train_language_model(model, train, val, config, on_report=lambda r: print(
        json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}),
        flush=True))
    wall = time.perf_counter() - started
    kept = dict(step=config.steps, reports=reports, train_config=config)
    save_language_model(out, model, tok, metrics={}, **kept)
    found = figures(out, data)
    found.update(train_seconds=reports[-1]["seconds"], wall_seconds=wall, threads=threads,
                 parameters=sum(p.numel() for p in model.parameters()))
    save_language_model(out, model, tok, metrics=found, **kept)
    found["megabytes"] = out.stat().st_size / 1e6
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=SHIPPED_LM, help=f"default: {SHIPPED_LM}")
    parser.add_argument("--steps", type=int, help=f"default: {RECIPE['train']['steps']}")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    found = ship(args.out, args.steps, args.threads)
    print(f"wrote {args.out}: {found['megabytes']:.2f} MB, {found['parameters'] / 1e6:.2f}M "
          f"parameters (float16); trained {found['train_seconds'] / 60:.1f} min "
          f"({found['wall_seconds'] / 60:.1f} min with evaluations)")
    print(f"validation loss {found['val_loss']:.3f} nats/token (perplexity "
          f"{found['val_perplexity']:.1f}); test2016 {found['test2016_loss']:.3f} "
          f"({found['test2016_perplexity']:.1f})")
    for text in found["samples"]:
        print("  ", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
