"""Buggy and valid implementations of the chapter 11 exercises: the decoder-only block, the
language model, sampling and the key/value cache.

The references (:mod:`transformer_ref.model.lm_block`, :mod:`transformer_ref.model.language_model`,
:mod:`transformer_ref.generation.sampling`, :mod:`transformer_ref.generation.lm_cache`): the block
is causal self-attention then the FFN, each in a pre-LN residual connection with dropout on the
sub-layer's output; the model adds learned positions to the scaled embeddings, runs the blocks, a
final LayerNorm and the (optionally tied) generator; ``sample`` divides the logits by the
temperature, keeps the top-k, then the top-p nucleus (the crossing token included), and draws with
the generator; the cache feeds new tokens at the positions after the cached ones, appends their keys
and values, and follows ``reorder``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from autograder.demo.mutants import Mutant
from autograder.exercises.cache_variants import CacheVariant
from transformer_ref.model.embeddings import Embeddings
from transformer_ref.model.generator import Generator
from transformer_ref.model.learned_positional import LearnedPositionalEncoding
from transformer_ref.model.lm_block import DecoderOnlyBlock
from transformer_ref.modules import MultiHeadAttention, PositionwiseFeedForward

BLOCK = "ch11.decoder_only_block"
MODEL = "ch11.language_model"
SAMPLE = "ch11.sample"
CACHE = "ch11.key_value_cache"


# --- the block ------------------------------------------------------------------------------

class _Block(nn.Module):
    """The block's parts under the course's names; subclasses write ``forward``."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def causal(self, x: Tensor) -> Tensor:
        return torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).tril()

    def attend(self, y: Tensor, mask: Tensor | None) -> Tensor:
        return self.self_attn(y, y, y, mask)


class BlockPostLN(_Block):
    """The paper's post-LN order, norm(x + dropout(sublayer(x)))."""

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm1(x + self.dropout(self.attend(x, self.causal(x))))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class BlockNoMask(_Block):
    """Forgets the causal mask."""

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.dropout(self.attend(self.norm1(x), None))
        return x + self.dropout(self.feed_forward(self.norm2(x)))


class BlockStrictMask(_Block):
    """tril(-1): no position may attend to itself, and the first to nothing."""

    def forward(self, x: Tensor) -> Tensor:
        mask = torch.ones(x.size(1), x.size(1), dtype=torch.bool).tril(-1)
        x = x + self.dropout(self.attend(self.norm1(x), mask))
        return x + self.dropout(self.feed_forward(self.norm2(x)))


class BlockGelu(_Block):
    """GPT-2's GELU in the feed-forward network instead of the paper's ReLU."""

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.dropout(self.attend(self.norm1(x), self.causal(x)))
        ffn = self.feed_forward
        return x + self.dropout(ffn.w_2(ffn.dropout(F.gelu(ffn.w_1(self.norm2(x))))))


class BlockNormsSwapped(_Block):
    def forward(self, x: Tensor) -> Tensor:
        x = x + self.dropout(self.attend(self.norm2(x), self.causal(x)))
        return x + self.dropout(self.feed_forward(self.norm1(x)))


class BlockNoResidualDropout(_Block):
    """Leaves out the block's own dropout on the sub-layer outputs."""

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attend(self.norm1(x), self.causal(x))
        return x + self.feed_forward(self.norm2(x))


class BlockDropoutOnSum(_Block):
    """Drops out the sum, residual included: x itself loses entries."""

    def forward(self, x: Tensor) -> Tensor:
        x = self.dropout(x + self.attend(self.norm1(x), self.causal(x)))
        return self.dropout(x + self.feed_forward(self.norm2(x)))


class BlockExplicit(_Block):
    """Valid: the mask from arange comparisons, the residual written out, F.dropout."""

    def forward(self, x: Tensor) -> Tensor:
        positions = torch.arange(x.size(1), device=x.device)
        mask = positions[None, :] <= positions[:, None]
        p = self.dropout.p
        h = self.attend(self.norm1(x), mask[None, None])
        x = x + F.dropout(h, p, self.training)
        h = self.feed_forward(self.norm2(x))
        return x + F.dropout(h, p, self.training)


class BlockNnMultiheadAttention(nn.Module):
    """Valid: torch's own nn.MultiheadAttention (fused in_proj, out_proj, True = masked);
    its dropout acts on the attention weights, as the course's does."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, h, dropout=dropout, batch_first=True)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        future = torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).triu(1)
        y = self.norm1(x)
        attended, _ = self.self_attn(y, y, y, attn_mask=future, need_weights=False)
        x = x + self.dropout(attended)
        return x + self.dropout(self.feed_forward(self.norm2(x)))


class BlockNnMultiheadAttentionFloatMask(BlockNnMultiheadAttention):
    """Valid: nn.MultiheadAttention with the float mask of
    nn.Transformer.generate_square_subsequent_mask (-inf above the diagonal). Such a mask keeps
    it off its fused path, so its output is a transposed view, on which one seed drops other
    entries than the reference's dropout does: only where dropout acts matters."""

    def forward(self, x: Tensor) -> Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(x.size(1), dtype=x.dtype)
        y = self.norm1(x)
        attended, _ = self.self_attn(y, y, y, attn_mask=mask)
        x = x + self.dropout(attended)
        return x + self.dropout(self.feed_forward(self.norm2(x)))


class BlockDropoutTwice(_Block):
    """Drops each sub-layer's output twice."""

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.dropout(self.dropout(self.attend(self.norm1(x), self.causal(x))))
        return x + self.dropout(self.dropout(self.feed_forward(self.norm2(x))))


class BlockRateTypedIn(_Block):
    """F.dropout with the paper's p = 0.1 typed in instead of the dropout argument."""

    def forward(self, x: Tensor) -> Tensor:
        h = self.attend(self.norm1(x), self.causal(x))
        x = x + F.dropout(h, 0.1, self.training)
        return x + F.dropout(self.feed_forward(self.norm2(x)), 0.1, self.training)


class _FeedForwardDroppingOutput(PositionwiseFeedForward):
    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(super().forward(x))


class BlockFeedForwardDropsItsOutput(_Block):
    """A feed-forward network that drops its own output (as minGPT's MLP does), in a block
    that drops it again: twice on one tensor."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.feed_forward = _FeedForwardDroppingOutput(d_model, d_ff, dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.dropout(self.attend(self.norm1(x), self.causal(x)))
        return x + self.dropout(self.feed_forward(self.norm2(x)))


class BlockPaperDropoutOnly(_Block):
    """Valid: the paper's dropout only: none inside the attention and the FFN."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__(d_model, h, d_ff, dropout)
        self.self_attn = MultiHeadAttention(d_model, h)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, 0.0)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.dropout(self.attend(self.norm1(x), self.causal(x)))
        return x + self.dropout(self.feed_forward(self.norm2(x)))


# --- the model ------------------------------------------------------------------------------

class LanguageModelParts(nn.Module):
    """The model's parts under the course's names; subclasses write ``forward``."""

    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048,
                 h: int = 8, dropout: float = 0.1, max_len: int = 256,
                 tie_weights: bool = True) -> None:
        super().__init__()
        self.embed = Embeddings(vocab, d_model)
        self.pos_encoding = LearnedPositionalEncoding(d_model, dropout, max_len)
        self.layers = nn.ModuleList(DecoderOnlyBlock(d_model, h, d_ff, dropout)
                                    for _ in range(N))
        self.norm = nn.LayerNorm(d_model)
        self.generator = Generator(d_model, vocab)
        self.max_len = max_len
        if tie_weights:
            self.generator.proj.weight = self.embed.lut.weight

    def blocks(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def forward(self, ids: Tensor) -> Tensor:
        return self.generator(self.norm(self.blocks(self.pos_encoding(self.embed(ids)))))


class ModelNoFinalNorm(LanguageModelParts):
    def forward(self, ids: Tensor) -> Tensor:
        return self.generator(self.blocks(self.pos_encoding(self.embed(ids))))


class ModelUnscaledEmbeddings(LanguageModelParts):
    """Looks the rows up without the factor sqrt(d_model)."""

    def forward(self, ids: Tensor) -> Tensor:
        return self.generator(self.norm(self.blocks(self.pos_encoding(self.embed.lut(ids)))))


class ModelSoftmax(LanguageModelParts):
    def forward(self, ids: Tensor) -> Tensor:
        return super().forward(ids).softmax(dim=-1)


class ModelNeverTied(LanguageModelParts):
    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048, h: int = 8,
                 dropout: float = 0.1, max_len: int = 256, tie_weights: bool = True) -> None:
        super().__init__(vocab, N, d_model, d_ff, h, dropout, max_len, tie_weights=False)


class ModelDropoutTwice(LanguageModelParts):
    """One more dropout on embeddings + positions, which LearnedPositionalEncoding already
    applies."""

    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048, h: int = 8,
                 dropout: float = 0.1, max_len: int = 256, tie_weights: bool = True) -> None:
        super().__init__(vocab, N, d_model, d_ff, h, dropout, max_len, tie_weights)
        self.drop = nn.Dropout(dropout)

    def forward(self, ids: Tensor) -> Tensor:
        x = self.drop(self.pos_encoding(self.embed(ids)))
        return self.generator(self.norm(self.blocks(x)))


class ModelWithoutMaxLen(LanguageModelParts):
    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048, h: int = 8,
                 dropout: float = 0.1, max_len: int = 256, tie_weights: bool = True) -> None:
        super().__init__(vocab, N, d_model, d_ff, h, dropout, max_len, tie_weights)
        del self.max_len


class ModelBlocksWithoutDropout(LanguageModelParts):
    """Builds the blocks with dropout 0: only embeddings + positions are dropped."""

    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048, h: int = 8,
                 dropout: float = 0.1, max_len: int = 256, tie_weights: bool = True) -> None:
        super().__init__(vocab, N, d_model, d_ff, h, dropout, max_len, tie_weights)
        self.layers = nn.ModuleList(DecoderOnlyBlock(d_model, h, d_ff, 0.0) for _ in range(N))


class ModelNoPositionalDropout(LanguageModelParts):
    """Builds the position table with dropout 0: embeddings + positions are never dropped."""

    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048, h: int = 8,
                 dropout: float = 0.1, max_len: int = 256, tie_weights: bool = True) -> None:
        super().__init__(vocab, N, d_model, d_ff, h, dropout, max_len, tie_weights)
        self.pos_encoding = LearnedPositionalEncoding(d_model, 0.0, max_len)


class ModelPaperDropoutOnly(LanguageModelParts):
    """Valid: the paper's dropout only: the blocks' attentions and feed-forward networks drop
    nothing inside."""

    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048, h: int = 8,
                 dropout: float = 0.1, max_len: int = 256, tie_weights: bool = True) -> None:
        super().__init__(vocab, N, d_model, d_ff, h, dropout, max_len, tie_weights)
        for block in self.layers:
            block.self_attn.dropout.p = 0.0
            block.feed_forward.dropout.p = 0.0


class ModelSequential(nn.Module):
    """Valid: the blocks in an nn.Sequential, tied the other way round, positions added by
    hand from the table (with the table's own dropout)."""

    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048,
                 h: int = 8, dropout: float = 0.1, max_len: int = 256,
                 tie_weights: bool = True) -> None:
        super().__init__()
        self.generator = Generator(d_model, vocab)
        self.embed = Embeddings(vocab, d_model)
        if tie_weights:
            self.embed.lut.weight = self.generator.proj.weight
        self.pos_encoding = LearnedPositionalEncoding(d_model, dropout, max_len)
        self.layers = nn.Sequential(*(DecoderOnlyBlock(d_model, h, d_ff, dropout)
                                      for _ in range(N)))
        self.norm = nn.LayerNorm(d_model)
        self.max_len = max_len

    def forward(self, ids: Tensor) -> Tensor:
        positions = torch.arange(ids.size(1), device=ids.device)
        x = self.embed.lut(ids) * math.sqrt(self.embed.lut.embedding_dim)
        x = self.pos_encoding.dropout(x + self.pos_encoding.pe(positions))
        return self.generator(self.norm(self.layers(x)))


class ModelOwnBlocks(LanguageModelParts):
    """Valid: built from blocks written out (as a learner's own DecoderOnlyBlock)."""

    def __init__(self, vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048, h: int = 8,
                 dropout: float = 0.1, max_len: int = 256, tie_weights: bool = True) -> None:
        super().__init__(vocab, N, d_model, d_ff, h, dropout, max_len, tie_weights)
        self.layers = nn.ModuleList(BlockExplicit(d_model, h, d_ff, dropout) for _ in range(N))


# --- sampling -------------------------------------------------------------------------------

def _filter(logits: Tensor, temperature: float, top_k: int | None, top_p: float | None, *,
            temperature_after: bool = False, multiply: bool = False, extra_k: int = 0,
            fill: float = -math.inf, crossing: bool = True, p_first: bool = False) -> Tensor:
    """The filtered logits ``(B, V)`` with the switches of the bugs below."""
    scaled = logits if temperature_after else (logits * temperature if multiply
                                               else logits / temperature)
    if top_k is not None and top_k < logits.size(-1):
        kth = scaled.topk(min(top_k + extra_k, logits.size(-1)), dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, fill)
    if top_p is not None and top_p < 1:
        basis = scaled.masked_fill(torch.isinf(scaled), -math.inf)
        if p_first:
            basis = logits.masked_fill(torch.isinf(scaled), -math.inf)
        sorted_probs, order = basis.softmax(-1).sort(dim=-1, descending=True)
        cumulative = sorted_probs.cumsum(-1)
        drop = (cumulative - sorted_probs) >= top_p if crossing else cumulative >= top_p
        drop[:, 0] = False
        scaled = scaled.masked_fill(drop.scatter(-1, order, drop), -math.inf)
    return scaled


def _sampler(**switches):
    """A sampler whose filtering has the bugs ``switches`` names (see :func:`_filter`)."""
    def sample(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None, top_p=None,
               generator=None):
        ids = prompt_ids
        for _ in range(max_new_tokens):
            logits = model(ids[:, -model.max_len:])[:, -1, :]
            probs = _filter(logits, temperature, top_k, top_p, **switches).softmax(-1)
            if switches.get("temperature_after"):
                probs = probs / temperature
            ids = torch.cat([ids, torch.multinomial(probs, 1, generator=generator)], dim=1)
        return ids
    return sample


sample_temperature_after_softmax = _sampler(temperature_after=True)
sample_temperature_multiplied = _sampler(multiply=True)
sample_top_k_plus_one = _sampler(extra_k=1)
sample_top_k_zero_mask = _sampler(fill=0.0)
sample_top_p_drops_crossing = _sampler(crossing=False)
sample_top_p_before_temperature = _sampler(p_first=True)


def sample_from_logits(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None,
                       top_p=None, generator=None):
    """Gives torch.multinomial the filtered logits (negative ones clipped to 0)."""
    ids = prompt_ids
    for _ in range(max_new_tokens):
        logits = _filter(model(ids[:, -model.max_len:])[:, -1, :], temperature, top_k, top_p)
        weights = logits.clamp_min(0) + 1e-12
        ids = torch.cat([ids, torch.multinomial(weights, 1, generator=generator)], dim=1)
    return ids


def sample_global_rng(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None,
                      top_p=None, generator=None):
    """Draws with torch's global random state, not with the generator passed in."""
    ids = prompt_ids
    for _ in range(max_new_tokens):
        logits = _filter(model(ids[:, -model.max_len:])[:, -1, :], temperature, top_k, top_p)
        ids = torch.cat([ids, torch.multinomial(logits.softmax(-1), 1)], dim=1)
    return ids


def sample_first_tokens(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None,
                        top_p=None, generator=None):
    """Crops the context to its first max_len tokens."""
    ids = prompt_ids
    for _ in range(max_new_tokens):
        logits = _filter(model(ids[:, : model.max_len])[:, -1, :], temperature, top_k, top_p)
        ids = torch.cat([ids, torch.multinomial(logits.softmax(-1), 1, generator=generator)], 1)
    return ids


def sample_new_tokens_only(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None,
                           top_p=None, generator=None):
    """Returns the new tokens without the prompt."""
    ids = _sampler()(model, prompt_ids, max_new_tokens, temperature, top_k, top_p, generator)
    return ids[:, prompt_ids.size(1):]


def sample_inverse_cdf(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None,
                       top_p=None, generator=None):
    """Valid: one uniform number per row and the cumulative distribution (searchsorted);
    top-p with a per-row loop over sorted Python lists."""
    ids = prompt_ids
    for _ in range(max_new_tokens):
        logits = model(ids[:, -model.max_len:])[:, -1, :] / temperature
        if top_k is not None:
            k = min(top_k, logits.size(-1))
            values, _ = torch.sort(logits, dim=-1, descending=True)
            logits = torch.where(logits >= values[:, k - 1 : k], logits, -math.inf)
        probs = torch.softmax(logits, dim=-1)
        if top_p is not None:
            for row in range(probs.size(0)):
                ranked = sorted(range(probs.size(1)), key=lambda i, r=row: -float(probs[r, i]))
                total, keep = 0.0, []
                for i in ranked:
                    keep.append(i)
                    total += float(probs[row, i])
                    if total >= top_p:
                        break
                mask = torch.zeros_like(probs[row], dtype=torch.bool)
                mask[keep] = True
                probs[row] = torch.where(mask, probs[row], 0.0)
            probs = probs / probs.sum(-1, keepdim=True)
        u = torch.rand(probs.size(0), 1, generator=generator, dtype=probs.dtype)
        cdf = probs.cumsum(-1)
        next_id = torch.searchsorted(cdf, u * cdf[:, -1:]).clamp_max(probs.size(-1) - 1)
        ids = torch.cat([ids, next_id], dim=1)
    return ids


def pick_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """The Gumbel-max trick: the argmax of the filtered logits plus Gumbel noise is a draw
    from their softmax (the notebook's sample_cached calls it too)."""
    logits = _filter(logits, temperature, top_k, top_p)
    u = torch.rand(logits.shape, generator=generator, dtype=logits.dtype)
    gumbel = -torch.log(-torch.log(u.clamp(1e-20, 1.0)))
    return (logits + gumbel).argmax(dim=-1, keepdim=True)


def sample_gumbel_max(model, prompt_ids, max_new_tokens, temperature=1.0, top_k=None,
                      top_p=None, generator=None):
    """Valid: each token drawn by the Gumbel-max trick."""
    ids = prompt_ids
    for _ in range(max_new_tokens):
        logits = model(ids[:, -model.max_len:])[:, -1, :]
        ids = torch.cat([ids, pick_next(logits, temperature, top_k, top_p, generator)], dim=1)
    return ids


# --- the cache ------------------------------------------------------------------------------

def _cache(**switches):
    """A cache class with the bugs ``switches`` names (see :class:`CacheVariant`)."""
    class KeyValueCache(CacheVariant):
        def __init__(self, model: nn.Module) -> None:
            super().__init__(model, **switches)
    return KeyValueCache


CachePositionsRestart = _cache(positions="restart")
CacheNotExtended = _cache(store="first")
CacheReplaced = _cache(store="replace")
CacheNotCausal = _cache(causal=False)
CacheReorderIgnored = _cache(reorder_rows=False)


class CacheNoLimit(CacheVariant):
    """Valid logits, but passes max_len by reading past the position table (no error)."""

    def __call__(self, ids: Tensor) -> Tensor:
        table = self.model.pos_encoding
        if self.length + ids.size(1) > table.max_len:
            return torch.zeros(*ids.shape, self.model.generator.proj.out_features,
                               dtype=table.pe.weight.dtype)
        return super().__call__(ids)


class CacheStatic:
    """Valid: buffers of max_len positions filled in place (a "static" cache), keys and values
    kept before the heads are split."""

    def __init__(self, model: nn.Module) -> None:
        self.model, self.length = model, 0
        self.keys: list[Tensor] = []
        self.values: list[Tensor] = []

    def __call__(self, ids: Tensor) -> Tensor:
        model, start, (batch, t) = self.model, self.length, ids.shape
        if start + t > model.max_len:
            raise ValueError(f"the cache holds {start} positions; max_len is {model.max_len}")
        x = model.pos_encoding(model.embed(ids), start=start)
        d_model = x.size(-1)
        if not self.keys:
            shape = (batch, model.max_len, d_model)
            self.keys = [x.new_zeros(shape) for _ in model.layers]
            self.values = [x.new_zeros(shape) for _ in model.layers]
        end = start + t
        for i, layer in enumerate(model.layers):
            attn = layer.self_attn
            y = layer.norm1(x)
            self.keys[i][:, start:end] = attn.w_k(y)
            self.values[i][:, start:end] = attn.w_v(y)

            def heads(z: Tensor, n: int, a=attn) -> Tensor:
                return z.reshape(batch, n, a.h, a.d_k).transpose(1, 2)

            q = heads(attn.w_q(y), t)
            k, v = heads(self.keys[i][:, :end], end), heads(self.values[i][:, :end], end)
            scores = q @ k.transpose(-2, -1) / math.sqrt(attn.d_k)
            allowed = torch.arange(end)[None, :] <= torch.arange(start, end)[:, None]
            weights = scores.masked_fill(~allowed, -math.inf).softmax(-1)
            out = (weights @ v).transpose(1, 2).reshape(batch, t, d_model)
            x = x + layer.dropout(attn.w_o(out))
            x = x + layer.dropout(layer.feed_forward(layer.norm2(x)))
        self.length = end
        return model.generator(model.norm(x))

    def reorder(self, rows: Tensor) -> None:
        self.keys = [k[rows] for k in self.keys]
        self.values = [v[rows] for v in self.values]


class CacheOneByOne:
    """Valid: new tokens fed one at a time inside the call, keys and values kept as lists of
    one position each, the attention written out."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.keys: list[list[Tensor]] = [[] for _ in model.layers]
        self.values: list[list[Tensor]] = [[] for _ in model.layers]

    def __call__(self, ids: Tensor) -> Tensor:
        return torch.cat([self._one(ids[:, i : i + 1]) for i in range(ids.size(1))], dim=1)

    def _one(self, token: Tensor) -> Tensor:
        model, position = self.model, len(self.keys[0])
        x = model.pos_encoding(model.embed(token), start=position)  # ValueError past max_len
        for i, layer in enumerate(model.layers):
            attn = layer.self_attn
            y = layer.norm1(x)
            self.keys[i].append(attn.w_k(y))
            self.values[i].append(attn.w_v(y))
            k, v = torch.cat(self.keys[i], dim=1), torch.cat(self.values[i], dim=1)
            outs = []
            for head in range(attn.h):
                part = slice(head * attn.d_k, (head + 1) * attn.d_k)
                q = attn.w_q(y)[..., part]
                weights = (q @ k[..., part].transpose(1, 2) / math.sqrt(attn.d_k)).softmax(-1)
                outs.append(weights @ v[..., part])
            x = x + layer.dropout(attn.w_o(torch.cat(outs, dim=-1)))
            x = x + layer.dropout(layer.feed_forward(layer.norm2(x)))
        return model.generator(model.norm(x))

    def reorder(self, rows: Tensor) -> None:
        self.keys = [[k[rows] for k in layer] for layer in self.keys]
        self.values = [[v[rows] for v in layer] for layer in self.values]


MUTANTS = [
    Mutant(BLOCK, "post-LN", BlockPostLN, False, "post-LN", every_secret=True),
    Mutant(BLOCK, "no causal mask", BlockNoMask, False, "future"),
    Mutant(BLOCK, "mask without the diagonal", BlockStrictMask, False, "diagonal"),
    Mutant(BLOCK, "GELU", BlockGelu, False, "GELU"),
    Mutant(BLOCK, "norms swapped", BlockNormsSwapped, False, "swapped"),
    Mutant(BLOCK, "no dropout on the sub-layer outputs", BlockNoResidualDropout, False,
           "the sub-layer outputs get no dropout", every_secret=True),
    Mutant(BLOCK, "dropout on the sum", BlockDropoutOnSum, False, "includes the residual x",
           every_secret=True),
    Mutant(BLOCK, "dropout twice on the sub-layer outputs", BlockDropoutTwice, False,
           "dropout acts twice", every_secret=True),
    Mutant(BLOCK, "feed-forward output dropped by the network and the block",
           BlockFeedForwardDropsItsOutput, False, "would drop it twice", every_secret=True),
    Mutant(BLOCK, "F.dropout with p typed in", BlockRateTypedIn, False, "as for dropout p = 0.1",
           every_secret=True),
    Mutant(BLOCK, "arange mask, F.dropout", BlockExplicit, True, every_secret=True),
    Mutant(BLOCK, "the paper's dropout only", BlockPaperDropoutOnly, True, every_secret=True),
    Mutant(BLOCK, "torch's nn.MultiheadAttention", BlockNnMultiheadAttention, True,
           every_secret=True),
    Mutant(BLOCK, "nn.MultiheadAttention with a float mask", BlockNnMultiheadAttentionFloatMask,
           True, every_secret=True),
    Mutant(MODEL, "no final norm", ModelNoFinalNorm, False, "final LayerNorm", every_secret=True),
    Mutant(MODEL, "unscaled embeddings", ModelUnscaledEmbeddings, False, "sqrt(d_model)",
           every_secret=True),
    Mutant(MODEL, "softmax output", ModelSoftmax, False, "raw logits"),
    Mutant(MODEL, "never tied", ModelNeverTied, False, "tie_weights=True"),
    Mutant(MODEL, "dropout twice on the input", ModelDropoutTwice, False,
           "dropout acts twice on the sums of the embeddings and the positions",
           every_secret=True),
    Mutant(MODEL, "blocks without dropout", ModelBlocksWithoutDropout, False,
           "the sub-layer outputs get no dropout", every_secret=True),
    Mutant(MODEL, "positions without dropout", ModelNoPositionalDropout, False,
           "the sums of the embeddings and the positions get no dropout", every_secret=True),
    Mutant(MODEL, "max_len not kept", ModelWithoutMaxLen, False, "self.max_len"),
    Mutant(MODEL, "nn.Sequential, tied the other way, positions by hand", ModelSequential, True,
           every_secret=True),
    Mutant(MODEL, "its own blocks", ModelOwnBlocks, True),
    Mutant(MODEL, "the paper's dropout only", ModelPaperDropoutOnly, True, every_secret=True),
    Mutant(SAMPLE, "temperature after the softmax", sample_temperature_after_softmax, False,
           "before the softmax", every_secret=True),
    Mutant(SAMPLE, "temperature multiplied", sample_temperature_multiplied, False,
           "multiplied by the temperature", every_secret=True),
    Mutant(SAMPLE, "top-k keeps k+1", sample_top_k_plus_one, False, "(k+1)-th",
           every_secret=True),
    Mutant(SAMPLE, "top-k masks with 0", sample_top_k_zero_mask, False, "float('-inf')",
           every_secret=True),
    Mutant(SAMPLE, "top-p drops the crossing token", sample_top_p_drops_crossing, False,
           "cross p was never drawn", every_secret=True),
    Mutant(SAMPLE, "top-p before the temperature", sample_top_p_before_temperature, False,
           "before the temperature", every_secret=True),
    Mutant(SAMPLE, "samples from the logits", sample_from_logits, False,
           "follow the logits themselves", every_secret=True),
    Mutant(SAMPLE, "global random state", sample_global_rng, False, "generator=generator",
           every_secret=True),
    Mutant(SAMPLE, "crops the first max_len tokens", sample_first_tokens, False,
           "ids[:, -model.max_len:]", every_secret=True),
    Mutant(SAMPLE, "new tokens only", sample_new_tokens_only, False, "only the new tokens"),
    Mutant(SAMPLE, "inverse CDF, top-p in a loop", sample_inverse_cdf, True),
    Mutant(SAMPLE, "Gumbel-max", sample_gumbel_max, True, every_secret=True),
    Mutant(CACHE, "positions restart at 0", CachePositionsRestart, False, "positions 0, 1",
           every_secret=True),
    Mutant(CACHE, "cache not extended", CacheNotExtended, False, "never reach the cache",
           every_secret=True),
    Mutant(CACHE, "cache replaced", CacheReplaced, False, "append to the cache",
           every_secret=True),
    Mutant(CACHE, "no causal mask among new tokens", CacheNotCausal, False,
           "in both directions", every_secret=True),
    Mutant(CACHE, "reorder ignored", CacheReorderIgnored, False, "reorder(rows) left",
           every_secret=True),
    Mutant(CACHE, "no error past max_len", CacheNoLimit, False, "should raise ValueError"),
    Mutant(CACHE, "static buffers, keys before the heads", CacheStatic, True,
           every_secret=True),
    Mutant(CACHE, "one token at a time, heads in a loop", CacheOneByOne, True),
]
