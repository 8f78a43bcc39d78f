"""Train the two-layer attention-only model on random tokens repeated once; find its induction
head and record when it formed.

The model (:class:`~transformer_ref.model.attention_only.AttentionOnlyModel`) and the task
(:mod:`transformer_ref.training.induction_training`) are chapter 12's. The script prints the
held-out loss on the first and on the repeated half as training goes, then:

* where the sudden drop (the bump) happens: the last step of the plateau, the step at which the
  repeated half's loss is half the first half's, and the first step below 1 nat;
* every head's prefix-matching score
  (:func:`transformer_ref.induction.prefix_matching_score`) on the held-out batch, and the best
  head;

and with ``--ship`` saves the model in float16 with these figures
(:data:`~transformer_ref.training.induction_training.SHIPPED_INDUCTION`)::

    nice python benchmarks/induction_head.py --ship
    python benchmarks/induction_head.py --steps 100   # a quick try
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from transformer_ref.induction import prefix_matching_score
from transformer_ref.model.attention_only import AttentionOnlyModel
from transformer_ref.training.induction_training import (
    SHIPPED_INDUCTION,
    InductionConfig,
    repeated_tokens,
    save_induction_model,
    train_induction,
)

MODEL = dict(N=2, d_model=64, h=4, max_len=64)


def bump(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """When the repeated half's loss leaves the plateau: the last report still within 0.1 nats
    of the first half's loss, the first below half of it, and the first below 1 nat."""
    def first(test: Callable[[dict[str, Any]], bool]) -> int | None:
        return next((r["step"] for r in reports if test(r)), None)

    plateau = [r["step"] for r in reports
               if r["repeated_half_loss"] > r["first_half_loss"] - 0.1]
    return {"plateau_until": max(plateau, default=None),
            "half_way": first(lambda r: r["repeated_half_loss"] < r["first_half_loss"] / 2),
            "below_one_nat": first(lambda r: r["repeated_half_loss"] < 1.0)}


def head_scores(model: AttentionOnlyModel, config: InductionConfig) -> list[list[float]]:
    """Prefix-matching score of every head, ``[layer][head]``, on a fresh batch of 64."""
    ids = repeated_tokens(64, config.half, config.vocab,
                          torch.Generator().manual_seed(config.seed + 1))
    return prefix_matching_score(model.patterns(ids).mean(dim=1), config.half).tolist()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=InductionConfig.steps)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--ship", action="store_true", help=f"save to {SHIPPED_INDUCTION}")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = InductionConfig(steps=args.steps, seed=args.seed)
    torch.manual_seed(config.seed)
    model = AttentionOnlyModel(config.vocab, **MODEL)
    load_before = os.getloadavg()[0]
    reports = train_induction(model, config, on_report=lambda r: print(json.dumps(r)))
    scores = head_scores(model, config)
    best = max(((layer, head) for layer in range(len(scores)) for head in range(len(scores[0]))),
               key=lambda lh: scores[lh[0]][lh[1]])
    figures = {**bump(reports), "head_scores": scores, "best_head": list(best),
               "best_score": scores[best[0]][best[1]], "train_seconds": reports[-1]["seconds"],
               "final": reports[-1], "load_average": [load_before, os.getloadavg()[0]]}
    print(json.dumps(figures, indent=1))
    if args.ship:
        save_induction_model(SHIPPED_INDUCTION, model, config, reports, figures)
        print(f"wrote {SHIPPED_INDUCTION}: {SHIPPED_INDUCTION.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
