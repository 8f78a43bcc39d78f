"""The course's plain-Python byte-pair encoding against Hugging Face ``tokenizers`` on Multi30k.

Both learn from the same training captions (German and English) with the same number of
merges (``tokenizers`` is given the vocabulary size: the characters, the merges and the four
special tokens), then encode the validation captions; the script prints each one's vocabulary,
token count, characters per token and times. Chapter 10's section 14 runs the same comparison
with the learner's own functions.

    MULTI30K_DIR=... python benchmarks/bpe_vs_tokenizers.py --pairs 3000 --merges 500
"""

from __future__ import annotations

import argparse
import time

from transformer_ref.data.bpe import bpe_encode, learn_bpe
from transformer_ref.data.datasets import load_multi30k, verify_multi30k
from transformer_ref.data.tokenizer import train_bpe


def main() -> None:
    """Learn both tokenizers, encode the validation captions, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3000, help="training pairs learnt from")
    parser.add_argument("--merges", type=int, default=500)
    args = parser.parse_args()
    data_dir = verify_multi30k(None)
    captions = [s for pair in load_multi30k("train", data_dir)[:args.pairs] for s in pair]
    held_out = [s for pair in load_multi30k("val", data_dir) for s in pair]
    chars = sum(len(s) for s in held_out)
    alphabet = {ch for s in captions for ch in s}

    started = time.perf_counter()
    merges = learn_bpe(captions, args.merges)
    learnt = time.perf_counter() - started
    tokens = sum(len(bpe_encode(s, merges)) for s in held_out)
    encoded = time.perf_counter() - started - learnt
    print(f"{len(captions)} training captions, {len(held_out)} validation captions "
          f"({chars} characters)")
    print(f"course BPE: vocabulary {len(alphabet) + len(merges)}, {tokens} tokens "
          f"({chars / tokens:.2f} characters each), learnt in {learnt:.2f} s, "
          f"encoded in {encoded:.3f} s")

    started = time.perf_counter()
    tokenizer = train_bpe(captions, vocab_size=len(alphabet) + args.merges + 4)
    learnt = time.perf_counter() - started
    tokens = sum(len(e.tokens) for e in tokenizer.encode_batch(held_out))
    encoded = time.perf_counter() - started - learnt
    print(f"tokenizers: vocabulary {tokenizer.get_vocab_size()}, {tokens} tokens "
          f"({chars / tokens:.2f} characters each), learnt in {learnt:.2f} s, "
          f"encoded in {encoded:.3f} s")


if __name__ == "__main__":
    main()
