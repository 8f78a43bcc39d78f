"""Sentences per second of the translate command's decoding: batched against one at a time.

All runs translate the same first ``--sentences`` German sentences of test_2016_flickr with
the same beam size and the same ``max_len``, through
:func:`transformer_ref.generation.batch_translation.translate_batched`:

* the translate command's way: length-sorted batches of ``--batch-size`` sentences, decoded
  with the key/value cache (:func:`transformer_ref.translate.batch_decoder`);
* the same decoder, one sentence at a time (``batch_size=1``): the speed-up of batching;
* one sentence at a time with the plain decoders, which re-run the decoder over the whole
  prefix at every step (:func:`transformer_ref.decoding.beam_search`): how the command
  decoded before it batched and cached;
* batches without the cache: what batching alone gives.

They run side by side in one process, so the ratios hold up on a shared machine. Every run's
outputs are compared sentence by sentence with the first run's.

    python benchmarks/translation_speed.py                       # shipped model, beam 4, 200
    python benchmarks/translation_speed.py --beam 1 --sentences 100 --json speed.json

Needs Multi30k in ``MULTI30K_DIR`` (see :mod:`transformer_ref.data.datasets`).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from transformer_ref.data.datasets import load_multi30k, multi30k_dir
from transformer_ref.data.tokenizer import encode_batch
from transformer_ref.decoding import beam_search, greedy_decode
from transformer_ref.generation.batch_translation import translate_batched
from transformer_ref.training.device import resolve_device
from transformer_ref.translate import EXTRA_OUTPUT_TOKENS, batch_decoder, load_translator

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = ROOT / "solutions" / "ch10_translation" / "multi30k_small.pt"
BATCHED = "batched, cached (the translate command)"


def measure(checkpoint: Path, sentences: int, beam: int, batch_size: int, device: str,
            threads: int | None) -> dict[str, Any]:
    """Translate the test sentences in each way; return times, rates, speed-ups, agreement."""
    if threads is not None:
        torch.set_num_threads(threads)
    model, tok = load_translator(checkpoint, resolve_device(device))
    german = [de for de, _ in load_multi30k("test_2016_flickr", multi30k_dir())[:sentences]]
    ids = encode_batch(tok, german)
    # One max_len for every run (the batched default would take the longest sentence's).
    max_len = max(map(len, ids)) + EXTRA_OUTPUT_TOKENS
    plain = (greedy_decode if beam == 1
             else functools.partial(beam_search, beam_size=beam, length_penalty=0.6))
    ways = {
        BATCHED: (batch_decoder(beam), batch_size),
        "one at a time, cached": (batch_decoder(beam), 1),
        "one at a time, plain decoder": (plain, 1),
        "batched, plain decoder": (plain, batch_size),
    }
    runs: dict[str, dict[str, Any]] = {}
    for name, (decoder, size) in ways.items():
        started = time.perf_counter()
        outputs = translate_batched(model, ids, max_len, size, decoder=decoder)
        seconds = time.perf_counter() - started
        runs[name] = {"seconds": seconds, "sentences_per_second": len(german) / seconds,
                      "identical": sum(a == b for a, b in zip(outputs, runs.get(
                          BATCHED, {"outputs": outputs})["outputs"], strict=True)),
                      "outputs": outputs}
    for run in runs.values():
        run["speedup_of_batched"] = run["seconds"] / runs[BATCHED]["seconds"]
        del run["outputs"]
    return {"checkpoint": str(checkpoint), "sentences": len(german), "beam": beam,
            "batch_size": batch_size, "threads": torch.get_num_threads(), "runs": runs}


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
          f"{result['threads']} threads, {result['batch_size']} sentences per batch")
    for name, run in result["runs"].items():
        print(f"  {name:<41} {run['seconds']:7.1f} s, {run['sentences_per_second']:6.2f} "
              f"sentences/s; the command is {run['speedup_of_batched']:5.2f}x as fast; "
              f"identical outputs: {run['identical']} of {result['sentences']}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
