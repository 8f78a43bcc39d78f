"""Train the reference Transformer from the command line.

Examples::

    python -m transformer_ref.train --task reverse --preset cpu --out runs/reverse
    python -m transformer_ref.train --task multi30k --preset gpu --device cuda --out runs/m30k
    torchrun --nproc_per_node=2 -m transformer_ref.train --task multi30k --preset gpu

Writes ``OUT/checkpoint.pt`` (see :mod:`transformer_ref.training.checkpoint`) and
``OUT/metrics.json`` (wall time, steps, tokens per second, final metrics, device, and the history of
the evaluations run every ``--eval-every`` steps, each with its training seconds so far). Synthetic
tasks report exact match on held-out sequences (greedy decoding); Multi30k reports sacreBLEU (with
its signature) on test_2016_flickr, decoded with beam search, and evaluates with greedy BLEU on the
preset's first validation sentences along the way.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from torch import nn

from transformer_ref.data.batching import collate
from transformer_ref.data.datasets import load_multi30k, multi30k_dir, synthetic_pairs
from transformer_ref.data.tokenizer import decode, encode_batch, load_or_train_tokenizer
from transformer_ref.data.vocab import PAD_ID
from transformer_ref.model.build import build_model
from transformer_ref.training.checkpoint import load_checkpoint, unwrap
from transformer_ref.training.device import autocast_dtype, device_name
from transformer_ref.training.loop import (
    Checkpointing,
    cleanup_distributed,
    fit,
    init_distributed,
    pair_length,
    seed_everything,
)
from transformer_ref.training.losses import LabelSmoothingLoss
from transformer_ref.training.metrics import corpus_bleu, exact_match
from transformer_ref.training.presets import (
    PRESETS,
    TASKS,
    Preset,
    get_preset,
    parse_setting,
    with_settings,
)

Pair = tuple[list[int], list[int]]
FIRST_SYMBOL_ID = 4  # synthetic symbols follow the four special ids
DECODE_SENTENCES_PER_BATCH = 200


# ---------------------------------------------------------------------------------------------
# Decoding helpers


def _autocast(device: torch.device):
    dtype = autocast_dtype(device)
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()


def translate_ids(
    model: nn.Module,
    sources: Sequence[list[int]],
    device: torch.device,
    *,
    beam_size: int = 1,
    length_penalty: float = 0.6,
    extra_len: int = 10,
) -> list[list[int]]:
    """Decode id sequences in length-sorted batches; returns outputs in the input order.

    ``beam_size=1`` is greedy decoding. At most ``1.5 * longest source + extra_len`` tokens are
    generated (capped by the model's positional range).
    """
    # Imported here: the batched decoders hold chapter 10's answers, which a class's learners
    # do not see while that chapter is open; the rest of this module works without them.
    from transformer_ref.generation.batch_translation import translate_batched
    from transformer_ref.translate import batch_decoder

    limit = model.config.get("max_len", 5000) - 1
    max_len = min(int(1.5 * max(map(len, sources))) + extra_len, limit)
    with _autocast(device):
        return translate_batched(model, sources, max_len, DECODE_SENTENCES_PER_BATCH,
                                 decoder=batch_decoder(beam_size, length_penalty))


def mean_loss(model: nn.Module, pairs: list[Pair], device: torch.device) -> float:
    """Unsmoothed cross-entropy per target token over ``pairs`` (nats)."""
    loss_fn = LabelSmoothingLoss(model.config["tgt_vocab"], PAD_ID, 0.0, reduction="sum")
    total, tokens = 0.0, 0
    for start in range(0, len(pairs), DECODE_SENTENCES_PER_BATCH):
        batch = collate(pairs[start : start + DECODE_SENTENCES_PER_BATCH]).to(device)
        with torch.no_grad(), _autocast(device):
            logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)
        total += float(loss_fn(logits, batch.tgt_out))
        tokens += batch.n_tokens
    return total / max(tokens, 1)


# ---------------------------------------------------------------------------------------------
# Tasks


class TaskSetup:
    """Data, vocabulary and evaluation for one task."""

    def __init__(
        self,
        train_pairs: list[Pair],
        vocab_size: int,
        evaluate: Callable[[nn.Module], dict[str, float]],
        final: Callable[[nn.Module], dict[str, Any]],
        stop_when: Callable[[dict[str, float]], bool] | None = None,
        tokenizer: str | None = None,
    ) -> None:
        self.train_pairs = train_pairs
        self.vocab_size = vocab_size
        self.evaluate = evaluate
        self.final = final
        self.stop_when = stop_when
        self.tokenizer = tokenizer


def synthetic_setup(preset: Preset, seed: int, device: torch.device) -> TaskSetup:
    """Training pairs plus held-out pairs whose sources never occur in training."""
    kwargs = dict(num_symbols=preset.num_symbols, min_len=preset.min_len, max_len=preset.max_len)
    train = synthetic_pairs(preset.task, preset.num_train, seed=2 * seed, **kwargs)
    seen = {tuple(src) for src, _ in train}
    candidates = synthetic_pairs(preset.task, preset.num_eval, seed=2 * seed + 1, **kwargs)
    held_out = [pair for pair in candidates if tuple(pair[0]) not in seen]
    if not held_out:
        raise ValueError("every held-out sequence also occurs in training; use longer sequences")
    sources = [src for src, _ in held_out]
    targets = [tgt for _, tgt in held_out]

    def evaluate(model: nn.Module) -> dict[str, float]:
        return {"exact_match": exact_match(translate_ids(model, sources, device), targets)}

    def final(model: nn.Module) -> dict[str, Any]:
        return {**evaluate(model), "held_out_sequences": len(held_out)}

    return TaskSetup(
        train_pairs=train,
        vocab_size=FIRST_SYMBOL_ID + preset.num_symbols,
        evaluate=evaluate,
        final=final,
        stop_when=lambda m: m["exact_match"] >= preset.target_exact_match,
    )


def multi30k_setup(
    preset: Preset, device: torch.device, tokenizer_json: str | None = None,
    *, test: bool = True,
) -> TaskSetup:
    """German->English Multi30k with a joint BPE vocabulary (reused from a checkpoint on resume).

    The final evaluation decodes the whole validation set with beam search, and test_2016_flickr
    too unless ``test`` is False (tuning runs choose their settings on validation BLEU only).
    """
    data_dir = multi30k_dir()
    if tokenizer_json is not None:
        tok = Tokenizer.from_str(tokenizer_json)
    else:
        tok = load_or_train_tokenizer(data_dir, vocab_size=preset.bpe_vocab_size)

    def encode_pairs(split: str) -> tuple[list[Pair], list[str]]:
        raw = load_multi30k(split, data_dir)
        german = encode_batch(tok, [de for de, _ in raw])
        english = encode_batch(tok, [en for _, en in raw])
        return list(zip(german, english, strict=True)), [en for _, en in raw]

    train, _ = encode_pairs("train")
    train = [p for p in train if pair_length(p) <= preset.max_train_len]
    val, val_refs = encode_pairs("val")
    test_pairs, test_refs = encode_pairs("test_2016_flickr") if test else ([], [])
    val_sample = val[: preset.eval_sentences]

    def bleu(model: nn.Module, pairs: list[Pair], refs: list[str], beam: int) -> Any:
        hyps = translate_ids(model, [src for src, _ in pairs], device, beam_size=beam,
                             length_penalty=preset.length_penalty)
        return corpus_bleu([decode(tok, h) for h in hyps], refs[: len(pairs)])

    def evaluate(model: nn.Module) -> dict[str, float]:
        metrics = {"val_loss": mean_loss(model, val, device)}
        if val_sample:
            metrics["val_bleu_greedy"] = bleu(model, val_sample, val_refs, 1).score
        return metrics

    def final(model: nn.Module) -> dict[str, Any]:
        started = time.perf_counter()
        val_score = bleu(model, val, val_refs, preset.beam_size)
        metrics: dict[str, Any] = {
            "val_loss": mean_loss(model, val, device),
            "val_bleu": val_score.score,
            "bleu_signature": val_score.signature,
            "beam_size": preset.beam_size,
            "length_penalty": preset.length_penalty,
        }
        if test:
            metrics["test_2016_flickr_bleu"] = bleu(model, test_pairs, test_refs,
                                                    preset.beam_size).score
        metrics["decode_seconds"] = time.perf_counter() - started
        return metrics

    return TaskSetup(train, tok.get_vocab_size(), evaluate, final, tokenizer=tok.to_str())


# ---------------------------------------------------------------------------------------------
# Command line


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_ref.train",
        description="Train the reference Transformer on a synthetic task or Multi30k de->en.",
    )
    parser.add_argument("--task", choices=TASKS, default="reverse")
    parser.add_argument("--preset", choices=PRESETS, default=None,
                        help="model/training size (default: gpu on CUDA, else cpu)")
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    parser.add_argument("--out", type=Path, default=None,
                        help="run directory (default: runs/TASK-PRESET)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=None, help="override the preset")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="override the preset's training time budget")
    parser.add_argument("--eval-every", type=_non_negative_int, default=None, metavar="N",
                        help="override the preset's evaluation interval: evaluate every N "
                             "steps (0: only at the end)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from OUT/checkpoint.pt (with --max-steps: train further)")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="change one setting of the preset, e.g. --set dropout=0.2 "
                             "--set warmup=200 (model, training and preset fields; for "
                             "tuning runs, which record them in metrics.json)")
    parser.add_argument("--no-test", action="store_true",
                        help="Multi30k: score only the validation set at the end, not "
                             "test_2016_flickr (for tuning runs)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _check_out_dir(out: Path, task: str, resume: bool) -> dict[str, Any] | None:
    """Refuse to mix tasks in one run directory; return the checkpoint to resume, if any."""
    path = out / "checkpoint.pt"
    if not path.is_file():
        if resume:
            raise FileNotFoundError(
                f"--resume was given but {path} does not exist; drop --resume to start a new run"
            )
        return None
    checkpoint = load_checkpoint(path)
    if checkpoint.get("task") != task:
        raise ValueError(
            f"{out} already holds a checkpoint for task {checkpoint.get('task')!r}, not "
            f"{task!r}; choose another --out"
        )
    return checkpoint if resume else None


def _task_and_model(args: argparse.Namespace, preset: Preset, device: torch.device,
                    resume_from: dict[str, Any] | None) -> tuple[TaskSetup, nn.Module]:
    """The task's data and evaluation, and the model on ``device`` (a resumed run's
    architecture comes from its checkpoint ``resume_from``)."""
    if device.type == "cpu" and preset.cpu_threads is not None:
        torch.set_num_threads(preset.cpu_threads)
    seed_everything(args.seed)
    if args.task == "multi30k":
        tokenizer_json = resume_from.get("tokenizer") if resume_from else None
        setup = multi30k_setup(preset, device, tokenizer_json, test=not args.no_test)
    else:
        setup = synthetic_setup(preset, args.seed, device)
    if resume_from is not None:
        model = build_model(**resume_from["model_config"])
    else:
        model = build_model(setup.vocab_size, setup.vocab_size, **preset.model)
    return setup, model.to(device)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Train and evaluate as ``args`` asks; returns the metrics written to metrics.json."""
    wall_started = time.perf_counter()
    dist_info, device = init_distributed(args.device)
    preset_name = args.preset or ("gpu" if device.type == "cuda" else "cpu")
    preset = get_preset(args.task, preset_name, max_steps=args.max_steps,
                        max_minutes=args.max_minutes, eval_every=args.eval_every,
                        seed=args.seed)
    settings = dict(parse_setting(text) for text in args.settings)
    preset = with_settings(preset, settings)
    out = args.out or Path("runs") / f"{args.task}-{preset_name}"
    resume_from = _check_out_dir(out, args.task, args.resume)
    log = print if dist_info.is_main else (lambda _msg: None)
    log(f"task {args.task}, preset {preset_name}, device {device_name(device)}, "
        f"processes {dist_info.world_size}, out {out}")

    setup, model = _task_and_model(args, preset, device, resume_from)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"{len(setup.train_pairs)} training pairs, vocabulary {setup.vocab_size}, "
        f"{n_params / 1e6:.2f}M parameters")

    result = fit(
        model, setup.train_pairs, preset.train, device=device,
        evaluate=setup.evaluate, stop_when=setup.stop_when,
        checkpoint=Checkpointing(out / "checkpoint.pt", resume=resume_from is not None,
                                 task=args.task, tokenizer=setup.tokenizer,
                                 extra={"preset": preset_name}),
        progress=not args.no_progress, log=log,
    )
    report: dict[str, Any] = {}
    if dist_info.is_main:
        model.eval()
        final = setup.final(model)
        report = {
            "task": args.task,
            "preset": preset_name,
            "device": device_name(device),
            "processes": dist_info.world_size,
            "seed": args.seed,
            "settings": settings,
            "model_config": {k: v for k, v in unwrap(model).config.items()
                             if k not in ("src_vocab", "tgt_vocab")},
            "train_config": asdict(preset.train),
            "steps": result.step,
            "stopped_early": result.stopped_early,
            "stop_reason": result.stop_reason,
            "train_seconds": result.train_seconds,
            "target_tokens_per_second": result.tokens_per_second,
            "wall_seconds": time.perf_counter() - wall_started,
            "parameters": n_params,
            "metrics": final,
            "history": result.history,
        }
        (out / "metrics.json").write_text(json.dumps(report, indent=2) + "\n")
        _print_summary(report, out)
    return report


def _print_summary(report: dict[str, Any], out: Path) -> None:
    metrics = report["metrics"]
    print(f"done: {report['steps']} steps in {report['wall_seconds']:.1f} s wall "
          f"({report['target_tokens_per_second']:.0f} target tokens/s) on {report['device']}")
    if report["stop_reason"]:
        print(f"stopped early: {report['stop_reason']}")
    if "exact_match" in metrics:
        print(f"held-out exact match: {100 * metrics['exact_match']:.1f}% "
              f"({metrics['held_out_sequences']} sequences)")
    else:
        print(f"validation BLEU (beam {metrics['beam_size']}): {metrics['val_bleu']:.2f}")
        if "test_2016_flickr_bleu" in metrics:
            print(f"test_2016_flickr BLEU (beam {metrics['beam_size']}): "
                  f"{metrics['test_2016_flickr_bleu']:.2f}")
        print(f"sacreBLEU signature: {metrics['bleu_signature']}")
    print(f"wrote {out / 'checkpoint.pt'} and {out / 'metrics.json'}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        run(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        cleanup_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
