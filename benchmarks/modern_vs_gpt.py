"""Chapter 11's GPT block against today's block, at the same parameter count and the same steps.

Both language models are trained on the English captions of Multi30k, tokenized with the BPE
of the model chapter 11 ships (2,000 tokens), with the same optimiser settings, the same number
of steps and, for a given seed, the same batches in the same order:

* ``gpt``: :class:`~transformer_ref.model.language_model.LanguageModel`: pre-LN LayerNorm,
  multi-head attention (4 heads), a ReLU FFN of width 512 and a learned position table;
* ``modern``: :class:`~transformer_ref.model.modern_lm.ModernLanguageModel`: RMSNorm,
  grouped-query attention (4 query heads, 2 key/value heads) with RoPE, and SwiGLU, whose hidden
  width is chosen so that the two models have the same number of parameters (GQA's smaller key
  and value projections leave room for a wider SwiGLU).

Both have 2 blocks of width 128, a tied output and no dropout (Llama's block has none), so
that only the block differs. The script prints, per run, the validation loss (nats per BPE
token) and the training throughput (target tokens per second of training, evaluations
excluded), then both side by side. With ``--ship`` it saves the seed-0 model of each kind in
float16 (:data:`~transformer_ref.training.lm_training.SHIPPED_BLOCKS`), with every run's
figures, for chapter 12's notebook::

    nice python benchmarks/modern_vs_gpt.py --ship
    nice python benchmarks/modern_vs_gpt.py --interleaved 10   # throughput only, in turns
    python benchmarks/modern_vs_gpt.py --steps 20 --seeds 0   # a quick try

Needs Multi30k in ``MULTI30K_DIR`` (see :mod:`transformer_ref.data.datasets`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import torch
from torch import nn

from transformer_ref.data.datasets import multi30k_dir
from transformer_ref.data.vocab import PAD_ID
from transformer_ref.model.language_model import LanguageModel
from transformer_ref.model.modern_lm import ModernLanguageModel
from transformer_ref.training.lm_training import (
    SHIPPED_BLOCKS,
    LMTrainConfig,
    encode_sentences,
    english_sentences,
    lm_batches,
    load_language_model,
    next_token_loss,
    save_language_model,
    train_language_model,
)

SHARED = dict(N=2, d_model=128, h=4, max_len=64, tie_weights=True)
GPT = dict(SHARED, d_ff=512, dropout=0.0)
MODERN = dict(SHARED, n_kv_heads=2)
TRAIN = dict(steps=1500, max_tokens=2000, lr=2e-3, warmup=100, weight_decay=0.1, clip_norm=1.0,
             eval_every=100)


def count(model: nn.Module) -> int:
    """Parameters of ``model`` (a tied matrix once)."""
    return sum(p.numel() for p in model.parameters())


def matching_width(vocab: int, target: int) -> int:
    """The SwiGLU width that brings :data:`MODERN` closest to ``target`` parameters: each unit
    of width adds ``3 * d_model`` weights per block."""
    base = count(ModernLanguageModel(vocab, d_ff=1, **MODERN))
    return 1 + round((target - base) / (3 * MODERN["N"] * MODERN["d_model"]))


def build(kind: str, vocab: int) -> nn.Module:
    """The ``"gpt"`` or ``"modern"`` model of the comparison, freshly initialised."""
    if kind == "gpt":
        return LanguageModel(vocab, **GPT)
    d_ff = matching_width(vocab, count(LanguageModel(vocab, **GPT)))
    return ModernLanguageModel(vocab, d_ff=d_ff, **MODERN)


def run(kind: str, seed: int, data: dict[str, Any], steps: int) -> dict[str, Any]:
    """Train one model; return its figures and the trained model (``"model"``)."""
    config = LMTrainConfig(**{**TRAIN, "steps": steps, "seed": seed})
    torch.manual_seed(seed)
    model = build(kind, data["vocab"])
    load_before = os.getloadavg()[0]
    reports = train_language_model(model, data["train"], data["val"], config, on_report=lambda r:
                                   print(json.dumps({"kind": kind, "seed": seed, **r}),
                                         flush=True))
    last = reports[-1]
    return {"kind": kind, "seed": seed, "parameters": count(model), "steps": steps,
            "val_loss": last["val_loss"], "train_seconds": last["seconds"],
            "tokens_per_second": last["tokens"] / last["seconds"],
            "load_average": [load_before, os.getloadavg()[0]], "reports": reports,
            "train_config": config, "model": model}


def interleaved_throughput(data: dict[str, Any], rounds: int, steps: int = 10
                           ) -> dict[str, float]:
    """Training tokens per second of each kind, measured in turns: ``rounds`` times, ``steps``
    optimizer steps of one model then of the other on the same batches, so that a change in
    the machine's load affects both alike (after one unmeasured turn each)."""
    batches = lm_batches(data["train"], TRAIN["max_tokens"], shuffle=True)[: steps]
    config = LMTrainConfig(**{**TRAIN, "steps": steps})
    models = {kind: build(kind, data["vocab"]) for kind in ("gpt", "modern")}
    optimizers = {kind: torch.optim.AdamW(m.parameters(), lr=config.lr)
                  for kind, m in models.items()}
    seconds = dict.fromkeys(models, 0.0)
    tokens = sum(int((ids[:, 1:] != PAD_ID).sum()) for ids in batches) * rounds
    for turn in range(rounds + 1):  # turn 0 warms up, unmeasured
        for kind, model in models.items():
            started = time.perf_counter()
            for ids in batches:
                loss = next_token_loss(model, ids)
                optimizers[kind].zero_grad(set_to_none=True)
                loss.backward()
                optimizers[kind].step()
            seconds[kind] += (time.perf_counter() - started) if turn else 0.0
    return {kind: tokens / spent for kind, spent in seconds.items()}


def table(runs: list[dict[str, Any]]) -> str:
    """The figures of every run, one line each, and the mean of each kind."""
    lines = [f"{'model':8} {'seed':>4} {'parameters':>10} {'val loss':>9} {'tokens/s':>9} "
             f"{'load':>9}"]
    for r in runs:
        lines.append(f"{r['kind']:8} {r['seed']:>4} {r['parameters']:>10,} {r['val_loss']:>9.3f} "
                     f"{r['tokens_per_second']:>9,.0f} {r['load_average'][0]:>4.1f}-"
                     f"{r['load_average'][1]:<4.1f}")
    for kind in dict.fromkeys(r["kind"] for r in runs):
        mine = [r for r in runs if r["kind"] == kind]
        lines.append(f"{kind:8} {'mean':>4} {mine[0]['parameters']:>10,} "
                     f"{sum(r['val_loss'] for r in mine) / len(mine):>9.3f} "
                     f"{sum(r['tokens_per_second'] for r in mine) / len(mine):>9,.0f}")
    return "\n".join(lines)


def ship(runs: list[dict[str, Any]], tok: Any) -> None:
    """Save each kind's first run (float16) where the notebook finds it, with every run's
    figures in its metrics (``"runs"``)."""
    figures = [{k: v for k, v in r.items() if k not in ("model", "reports", "train_config")}
               for r in runs]
    for kind, path in SHIPPED_BLOCKS.items():
        first = next(r for r in runs if r["kind"] == kind)
        save_language_model(path, first["model"], tok, step=first["steps"],
                            reports=first["reports"], train_config=first["train_config"],
                            metrics={**figures[runs.index(first)], "runs": figures})
        print(f"wrote {path}: {path.stat().st_size / 1e6:.2f} MB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=TRAIN["steps"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--ship", action="store_true", help="save the seed-0 models")
    parser.add_argument("--interleaved", type=int, metavar="ROUNDS",
                        help="only measure the throughput, in ROUNDS turns of 10 steps each")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    _, tok, _ = load_language_model()
    folder = multi30k_dir()
    data = {"vocab": tok.get_vocab_size(),
            "train": encode_sentences(tok, english_sentences("train", folder)),
            "val": encode_sentences(tok, english_sentences("val", folder))}
    if args.interleaved:
        found = interleaved_throughput(data, args.interleaved)
        print(f"tokens/s in turns ({args.interleaved} x 10 steps each, load "
              f"{os.getloadavg()[0]:.1f}): " + ", ".join(f"{k} {v:,.0f}" for k, v in found.items()))
        return 0
    runs = [run(kind, seed, data, args.steps) for seed in args.seeds for kind in ("gpt", "modern")]
    print(table(runs))
    if args.ship:
        ship(runs, tok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
