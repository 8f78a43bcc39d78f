"""Sentences per second of the translate command's decoding: batched against one at a time.

Both runs translate the same first ``--sentences`` German sentences of test_2016_flickr with
:func:`transformer_ref.translate.translate_sentences` (what ``python -m
transformer_ref.translate`` calls), the same beam size and the same ``max_len``: once in
length-sorted batches of ``--batch-size`` sentences, once with ``batch_size=1``. The two run
side by side in one process, so the ratio holds up on a shared machine. The outputs are
compared sentence by sentence and the count of identical ones is printed.

    python benchmarks/translation_speed.py                       # shipped model, beam 4, 200
    python benchmarks/translation_speed.py --beam 1 --sentences 100 --json speed.json

Needs Multi30k in ``MULTI30K_DIR`` (see :mod:`transformer_ref.data`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from transformer_ref.data import load_multi30k, multi30k_dir
from transformer_ref.device import resolve_device
from transformer_ref.tokenizer import encode_batch
from transformer_ref.translate import EXTRA_OUTPUT_TOKENS, load_translator, translate_sentences

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = ROOT / "solutions" / "ch10_translation" / "multi30k_small.pt"


def measure(checkpoint: Path, sentences: int, beam: int, batch_size: int, device: str,
            threads: int | None) -> dict[str, Any]:
    """Translate the test sentences both ways; return times, rates, speed-up and agreement."""
    if threads is not None:
        torch.set_num_threads(threads)
    model, tok = load_translator(checkpoint, resolve_device(device))
    german = [de for de, _ in load_multi30k("test_2016_flickr", multi30k_dir())[:sentences]]
    # One max_len for both runs (the batched default would take the longest sentence's).
    max_len = max(map(len, encode_batch(tok, german))) + EXTRA_OUTPUT_TOKENS
    runs = {}
    for name, size in (("batched", batch_size), ("one at a time", 1)):
        started = time.perf_counter()
        outputs = translate_sentences(model, tok, german, beam_size=beam, max_len=max_len,
                                      batch_size=size)
        seconds = time.perf_counter() - started
        runs[name] = {"seconds": seconds, "sentences_per_second": len(german) / seconds,
                      "outputs": outputs}
    batched, single = runs["batched"], runs["one at a time"]
    return {
        "checkpoint": str(checkpoint), "sentences": len(german), "beam": beam,
        "batch_size": batch_size, "threads": torch.get_num_threads(),
        "batched_seconds": batched["seconds"], "single_seconds": single["seconds"],
        "batched_sentences_per_second": batched["sentences_per_second"],
        "single_sentences_per_second": single["sentences_per_second"],
        "speedup": single["seconds"] / batched["seconds"],
        "identical": sum(a == b for a, b in zip(batched["outputs"], single["outputs"],
                                                 strict=True)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=CHECKPOINT)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: torch's choice)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    result = measure(args.checkpoint, args.sentences, args.beam, args.batch_size, args.device,
                     args.threads)
    print(f"{result['sentences']} test2016 sentences, beam {result['beam']}, "
          f"{result['threads']} threads")
    print(f"  batched ({result['batch_size']} per batch): {result['batched_seconds']:7.1f} s, "
          f"{result['batched_sentences_per_second']:6.2f} sentences/s")
    print(f"  one at a time:            {result['single_seconds']:7.1f} s, "
          f"{result['single_sentences_per_second']:6.2f} sentences/s")
    print(f"  speed-up {result['speedup']:.2f}x; identical outputs: {result['identical']} of "
          f"{result['sentences']}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
