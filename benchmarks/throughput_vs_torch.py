"""Training-step throughput of the reference model next to ``torch.nn.Transformer``.

Both models get the same work: the same embeddings, positional encoding, generator, sizes,
dropout, optimizer and batches. Only the encoder-decoder stack differs (ours from
:mod:`transformer_ref.modules`, the other ``nn.Transformer`` with ``batch_first=True`` and,
like the paper's post-LN model, no final LayerNorm after the stacks). One training step is
forward, cross-entropy loss, backward and an Adam step; the masks are built inside the step.

The two models are timed side by side in one run: after warm-up steps, repetitions alternate
between them (and swap the order each time), and the median over repetitions is reported.
Throughput counts real (non-padding) source plus target tokens per second.

On CUDA the step runs under bf16 autocast, and the "base-like" size also reports model FLOPs
utilisation (MFU) = model FLOPs per second / the GPU's dense bf16 peak, with model FLOPs per
step counted as

    6 * (P_enc * n_src + (P_dec + P_gen) * n_tgt)
      + 12 * N * d_model * sum_b (S_b^2 + T_b^2 + T_b * S_b)

where ``P_enc``, ``P_dec`` are the parameters of the encoder and decoder stacks, ``P_gen`` the
generator's weight matrix (embedding lookups do no matrix products), ``n_src``, ``n_tgt`` the
real tokens of the batch, and ``S_b``, ``T_b`` the real lengths of sequence ``b``. The first
term is the usual 2 FLOPs per multiply-add, forward plus twice that backward; the second is
the same rule for the two attention products (``Q K^T`` and ``weights V``) of the encoder
self-attention, decoder self-attention and cross-attention (the causal half is not
discounted).

Examples::

    python benchmarks/throughput_vs_torch.py                      # auto device, both sizes
    python benchmarks/throughput_vs_torch.py --sizes tiny --steps 3 --device cpu
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_ref.data.vocab import EOS_ID, PAD_ID
from transformer_ref.masks import make_src_mask, make_tgt_mask, shift_right, subsequent_mask
from transformer_ref.modules import Embeddings, Generator, PositionalEncoding, make_model

# Dense bf16 peak of common GPUs in FLOP/s (vendor data sheets, no sparsity); first match wins.
PEAK_BF16_FLOPS = {
    "H100 PCIe": 756e12,
    "H100": 989e12,
    "H200": 989e12,
    "A100": 312e12,
}


@dataclass(frozen=True)
class Size:
    """A model configuration and the batch it is trained on."""

    n_layers: int
    d_model: int
    d_ff: int
    heads: int
    vocab: int
    batch: int
    max_len: int


SIZES = {
    "tiny": Size(n_layers=2, d_model=64, d_ff=256, heads=4, vocab=1000, batch=32, max_len=24),
    "base-like": Size(n_layers=2, d_model=512, d_ff=2048, heads=8, vocab=8000, batch=64,
                      max_len=64),
}
CPU_BATCH_LIMIT = 8  # keeps a base-like step on a laptop CPU to about a second


class TorchTransformerModel(nn.Module):
    """``nn.Transformer`` between the same embeddings, positions and generator as ours."""

    def __init__(self, size: Size, dropout: float) -> None:
        super().__init__()
        self.src_embed = Embeddings(size.vocab, size.d_model)
        self.tgt_embed = Embeddings(size.vocab, size.d_model)
        self.pos_encoding = PositionalEncoding(size.d_model, dropout)
        self.generator = Generator(size.d_model, size.vocab)
        self.transformer = nn.Transformer(
            size.d_model, size.heads, size.n_layers, size.n_layers, size.d_ff, dropout,
            batch_first=True,
        )
        # Post-LN layers already end in a LayerNorm; ours adds no extra one after the stacks.
        self.transformer.encoder.norm = None
        self.transformer.decoder.norm = None

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Long ``(B, S)``, ``(B, T)`` -> logits ``(B, T, vocab)``."""
        src_is_pad = src == PAD_ID  # torch.nn marks positions to ignore with True
        causal_ignore = ~subsequent_mask(tgt_in.size(1), device=tgt_in.device)[0]
        hidden = self.transformer(
            self.pos_encoding(self.src_embed(src)),
            self.pos_encoding(self.tgt_embed(tgt_in)),
            tgt_mask=causal_ignore,
            src_key_padding_mask=src_is_pad,
            tgt_key_padding_mask=tgt_in == PAD_ID,
            memory_key_padding_mask=src_is_pad,
        )
        return self.generator(hidden)


def reference_forward(model: nn.Module) -> Callable[[Tensor, Tensor], Tensor]:
    """Our model behind the same ``(src, tgt_in) -> logits`` call, masks built inside."""

    def forward(src: Tensor, tgt_in: Tensor) -> Tensor:
        return model(src, tgt_in, make_src_mask(src), make_tgt_mask(tgt_in))

    return forward


def random_batches(size: Size, count: int, device: torch.device, seed: int) -> list[tuple]:
    """Padded ``(src, tgt_in, tgt_out)`` batches with lengths between half and all of max_len."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        def padded(lengths: Tensor) -> Tensor:
            ids = torch.randint(4, size.vocab, (size.batch, size.max_len), generator=generator)
            positions = torch.arange(size.max_len)
            ids[positions == (lengths - 1)[:, None]] = EOS_ID
            return ids.masked_fill(positions >= lengths[:, None], PAD_ID)

        src_len, tgt_len = (
            torch.randint(size.max_len // 2, size.max_len + 1, (size.batch,), generator=generator)
            for _ in range(2)
        )
        src, tgt = padded(src_len), padded(tgt_len)
        batches.append(tuple(t.to(device) for t in (src, shift_right(tgt), tgt)))
    return batches


def model_flops(n_layers: int, d_model: int, batch: tuple, params: dict[str, int]) -> float:
    """Model FLOPs of one training step (formula in the module docstring) of a model with
    ``n_layers`` layers of width ``d_model`` on ``batch`` = (source, _, shifted target), each
    padded ``(batch, length)``."""
    src, _, tgt_out = batch
    src_len = (src != PAD_ID).sum(1).double()
    tgt_len = (tgt_out != PAD_ID).sum(1).double()
    dense = 6 * (params["encoder"] * src_len.sum()
                 + (params["decoder"] + params["generator"]) * tgt_len.sum())
    pairs = src_len**2 + tgt_len**2 + tgt_len * src_len
    attention = 12 * n_layers * d_model * pairs.sum()
    return float(dense + attention)


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_BF16_FLOPS.items() if key in name), None)


class Trainer:
    """One model, its optimizer and a timed run of training steps."""

    def __init__(self, forward: Callable, model: nn.Module, device: torch.device) -> None:
        self.forward = forward
        self.model = model.to(device).train()
        # The fused Adam kernel makes the optimizer cost independent of how the weights are
        # split into tensors (ours keeps w_q, w_k, w_v apart; nn.MultiheadAttention packs them).
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
        self.device = device

    def step(self, batch: tuple) -> None:
        src, tgt_in, tgt_out = batch
        autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if self.device.type == "cuda"
            else contextlib.nullcontext()
        )
        with autocast:
            logits = self.forward(src, tgt_in)
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def timed(self, batches: list[tuple]) -> float:
        """Run one step per batch; return the seconds taken."""
        self._sync()
        start = time.perf_counter()
        for batch in batches:
            self.step(batch)
        self._sync()
        return time.perf_counter() - start

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def benchmark_size(name: str, size: Size, device: torch.device, args: argparse.Namespace) -> dict:
    """Time both models on one size; return tokens/s, step time and MFU per model."""
    if device.type == "cpu" and size.batch > CPU_BATCH_LIMIT:
        size = Size(**{**size.__dict__, "batch": CPU_BATCH_LIMIT})
    torch.manual_seed(0)
    ours_model = make_model(size.vocab, size.vocab, N=size.n_layers, d_model=size.d_model,
                            d_ff=size.d_ff, h=size.heads, dropout=args.dropout)
    torch_model = TorchTransformerModel(size, args.dropout)
    trainers = {
        "ours": Trainer(reference_forward(ours_model), ours_model, device),
        "torch": Trainer(torch_model, torch_model, device),
    }
    batches = random_batches(size, args.steps, device, seed=1)
    tokens = sum(int((src != PAD_ID).sum() + (tgt != PAD_ID).sum()) for src, _, tgt in batches)
    params = {
        part: sum(p.numel() for p in getattr(ours_model, part).parameters())
        for part in ("encoder", "decoder")
    }
    params["generator"] = ours_model.generator.proj.weight.numel()
    flops = sum(model_flops(size.n_layers, size.d_model, batch, params) for batch in batches)
    peak = peak_flops(device) if name == "base-like" else None

    for trainer in trainers.values():
        for batch in batches[: args.warmup]:
            trainer.step(batch)
    seconds: dict[str, list[float]] = {key: [] for key in trainers}
    order = list(trainers)
    for _ in range(args.repeats):
        for key in order:
            seconds[key].append(trainers[key].timed(batches))
        order.reverse()  # neither model always runs first

    results = {}
    for key, times in seconds.items():
        median = statistics.median(times)
        results[key] = {
            "tokens_per_s": tokens / median,
            "step_ms": 1000 * median / len(batches),
            "mfu": None if peak is None else flops / median / peak,
        }
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    parser.add_argument("--sizes", default="tiny,base-like",
                        help=f"comma-separated, from: {', '.join(SIZES)}")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per repetition")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions per model")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per model first")
    parser.add_argument("--dropout", type=float, default=0.1)
    args = parser.parse_args(argv)

    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; choose from {', '.join(SIZES)}")
    if args.steps < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--steps and --repeats must be at least 1, --warmup at least 0")

    precision = "bf16 autocast" if device.type == "cuda" else "float32"
    print(f"device: {device} ({precision}), {args.steps} steps x {args.repeats} repeats, "
          f"{args.warmup} warm-up steps")
    print(f"{'size':<10} {'model':<6} {'tokens/s':>12} {'ms/step':>9} {'MFU':>7}")
    for name in sizes:
        results = benchmark_size(name, SIZES[name], device, args)
        for key, r in results.items():
            mfu = "n/a" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
            print(f"{name:<10} {key:<6} {r['tokens_per_s']:>12,.0f} {r['step_ms']:>9.1f} {mfu:>7}")
        ratio = results["ours"]["tokens_per_s"] / results["torch"]["tokens_per_s"]
        print(f"{name:<10} ratio ours/torch: {ratio:.3f}")


if __name__ == "__main__":
    main()
