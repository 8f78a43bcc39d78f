"""The encoder-decoder Transformer of "Attention Is All You Need" as PyTorch modules.

The modules mirror the NumPy chapters one to one: attention, multi-head attention, the
position-wise feed-forward network, residual connections with layer normalisation, encoder
and decoder layers, embeddings with the sinusoidal positional encoding, and the generator.

Shapes used throughout (batch first):

* ``B`` batch size, ``S`` source length, ``T`` target length;
* ``d_model`` model width, ``h`` number of heads, ``d_k = d_model // h`` width of one head;
* masks are boolean, ``True`` = may attend (see :mod:`transformer_ref.masks`): the source mask
  is ``(B, 1, 1, S)``, the target mask ``(B, 1, T, T)``.

Two ways of computing attention are provided:

* :func:`attention` spells out ``softmax(Q K^T / sqrt(d_k)) V`` and returns the weights, so it
  is the one to read and the one used when attention maps are stored for plotting;
* :func:`fused_attention` calls :func:`torch.nn.functional.scaled_dot_product_attention`,
  which gives the same numbers faster and with less memory (it never returns the weights).

Example::

    >>> from transformer_ref.masks import make_src_mask, make_tgt_mask
    >>> model = make_model(src_vocab=100, tgt_vocab=100, N=2, d_model=64, d_ff=128, h=4)
    >>> src, tgt_in = torch.randint(4, 100, (2, 7)), torch.randint(4, 100, (2, 5))
    >>> logits = model(src, tgt_in, make_src_mask(src), make_tgt_mask(tgt_in))
    >>> logits.shape
    torch.Size([2, 5, 100])
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_ref.np_positional import positional_encoding
from transformer_ref.validation import require_divisible


def _check_mask(mask: Tensor | None, where: str) -> None:
    """Reject masks of the wrong kind before they silently mean the opposite."""
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(
            f"{where}: mask must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
            f"build it with transformer_ref.masks or convert a 0/1 mask with mask.bool()"
        )


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout: nn.Module | None = None,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention, written out step by step.

    Args:
        q: queries ``(..., n_q, d_k)``.
        k: keys ``(..., n_k, d_k)``.
        v: values ``(..., n_k, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., n_q, n_k)``; ``True`` = may attend.
        dropout: optional module applied to the attention weights (e.g. ``nn.Dropout``).

    Returns:
        ``(out, weights)``: ``out`` is ``(..., n_q, d_v)``; ``weights`` is ``(..., n_q, n_k)``,
        each row a probability distribution over the keys (before dropout).
    """
    _check_mask(mask, "attention")
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., n_q, n_k)
    if mask is not None:
        # The most negative finite number instead of -inf: a row with every key masked then
        # becomes uniform rather than NaN, and exp() of it is exactly 0 next to any real score.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    attended = weights if dropout is None else dropout(weights)
    return attended @ v, weights


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """The same computation as :func:`attention` through PyTorch's fused kernel.

    Args:
        q, k, v, mask: as for :func:`attention`.
        dropout_p: probability of dropping an attention weight; pass 0.0 outside training.

    Returns:
        ``out`` of shape ``(..., n_q, d_v)`` (the fused kernel does not return the weights).
    """
    _check_mask(mask, "fused_attention")
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


class MultiHeadAttention(nn.Module):
    """``h`` attention heads side by side, each of width ``d_k = d_model // h``.

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_o`` with
    ``head_i = Attention(Q W_q^i, K W_k^i, V W_v^i)``. The per-head projections are the
    column blocks of the ``d_model x d_model`` layers ``w_q``, ``w_k``, ``w_v``.

    Attributes:
        fast: use :func:`fused_attention` (``True``) or :func:`attention` (``False``).
        store_attention: when ``True``, the math path runs and its weights are kept in
            ``attn_weights``; turn it on for a whole model with :func:`store_attention`.
        attn_weights: the weights of the last forward pass, ``(B, h, n_q, n_k)``, detached;
            ``None`` until a pass with ``store_attention`` on.
    """

    def __init__(self, d_model: int, h: int, dropout: float = 0.0, fast: bool = True) -> None:
        super().__init__()
        require_divisible(d_model, h, "d_model", "h", "MultiHeadAttention")
        self.h = h
        self.d_k = d_model // h
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.fast = fast
        self.store_attention = False
        self.attn_weights: Tensor | None = None

    def _split_heads(self, x: Tensor) -> Tensor:
        """``(B, n, d_model) -> (B, h, n, d_k)``: a view, no copy."""
        batch, n, _ = x.shape
        return x.view(batch, n, self.h, self.d_k).transpose(1, 2)

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
    ) -> Tensor:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(B, n_q, d_model)``.
            key: ``(B, n_k, d_model)``.
            value: ``(B, n_k, d_model)``.
            mask: optional bool, broadcastable to ``(B, h, n_q, n_k)``, e.g. ``(B, 1, 1, n_k)``
                or ``(B, 1, n_q, n_k)``; ``True`` = may attend.

        Returns:
            ``(B, n_q, d_model)``.
        """
        q = self._split_heads(self.w_q(query))  # (B, h, n_q, d_k)
        k = self._split_heads(self.w_k(key))  # (B, h, n_k, d_k)
        v = self._split_heads(self.w_v(value))  # (B, h, n_k, d_k)

        if self.fast and not self.store_attention:
            dropout_p = self.dropout.p if self.training else 0.0
            out = fused_attention(q, k, v, mask, dropout_p)
        else:
            out, weights = attention(q, k, v, mask, self.dropout)
            if self.store_attention:
                self.attn_weights = weights.detach()

        batch, _, n_q, _ = out.shape
        out = out.transpose(1, 2).reshape(batch, n_q, self.h * self.d_k)  # merge the heads
        return self.w_o(out)


def store_attention(module: nn.Module, enabled: bool = True) -> nn.Module:
    """Switch weight storage on (or off) for every :class:`MultiHeadAttention` in ``module``.

    While it is on, each attention layer runs the math path and keeps its last weights in
    ``attn_weights`` ``(B, h, n_q, n_k)``, ready to plot::

        store_attention(model)
        model(src, tgt_in, src_mask, tgt_mask)
        weights = model.decoder.layers[0].cross_attn.attn_weights

    Switching it off also drops the stored weights. Returns ``module`` for chaining.
    """
    for layer in module.modules():
        if isinstance(layer, MultiHeadAttention):
            layer.store_attention = enabled
            if not enabled:
                layer.attn_weights = None
    return module


class PositionwiseFeedForward(nn.Module):
    """``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2``, applied to every position separately.

    Input and output ``(..., d_model)``; the hidden layer has width ``d_ff``. Dropout acts on
    the hidden activations (as in ``torch.nn.TransformerEncoderLayer``).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., d_model) -> (..., d_model)``."""
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))


def residual(
    x: Tensor,
    sublayer: Callable[[Tensor], Tensor],
    norm: nn.LayerNorm,
    dropout: nn.Dropout,
    norm_first: bool,
) -> Tensor:
    """One residual connection around a sub-layer, in one of two orders.

    * post-LN (the paper): ``LayerNorm(x + Dropout(Sublayer(x)))``;
    * pre-LN: ``x + Dropout(Sublayer(LayerNorm(x)))``; the residual path stays an identity,
      which makes deep stacks train without a careful warm-up.

    ``x`` and the result are ``(B, n, d_model)``.
    """
    if norm_first:
        return x + dropout(sublayer(norm(x)))
    return norm(x + dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network; each inside a residual connection."""

    def __init__(
        self,
        d_model: int,
        h: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        fast_attention: bool = True,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``x`` ``(B, S, d_model)``, ``mask`` bool ``(B, 1, 1, S)`` -> ``(B, S, d_model)``."""
        x = residual(
            x, lambda y: self.self_attn(y, y, y, mask), self.norm1, self.dropout, self.norm_first
        )
        return residual(x, self.feed_forward, self.norm2, self.dropout, self.norm_first)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, then the FFN."""

    def __init__(
        self,
        d_model: int,
        h: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        fast_attention: bool = True,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout, fast=fast_attention)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(
        self, x: Tensor, memory: Tensor, src_mask: Tensor | None, tgt_mask: Tensor | None
    ) -> Tensor:
        """Run one decoder layer.

        Args:
            x: decoder states ``(B, T, d_model)``.
            memory: encoder output ``(B, S, d_model)``; queries come from ``x``, keys and
                values from ``memory``.
            src_mask: bool ``(B, 1, 1, S)``.
            tgt_mask: bool ``(B, 1, T, T)`` (causal and padding).

        Returns:
            ``(B, T, d_model)``.
        """
        x = residual(
            x, lambda y: self.self_attn(y, y, y, tgt_mask), self.norm1, self.dropout,
            self.norm_first,
        )
        x = residual(
            x, lambda y: self.cross_attn(y, memory, memory, src_mask), self.norm2, self.dropout,
            self.norm_first,
        )
        return residual(x, self.feed_forward, self.norm3, self.dropout, self.norm_first)


def _final_norm(d_model: int, norm_first: bool) -> nn.Module:
    # Pre-LN layers leave their output un-normalised, so the stack ends with one LayerNorm;
    # post-LN layers already end with one.
    return nn.LayerNorm(d_model) if norm_first else nn.Identity()


class Encoder(nn.Module):
    """A stack of ``n_layers`` :class:`EncoderLayer` (in ``layers``) and a final ``norm``."""

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        h: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        fast_attention: bool = True,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, h, d_ff, dropout, norm_first, fast_attention)
            for _ in range(n_layers)
        )
        self.norm = _final_norm(d_model, norm_first)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``x`` ``(B, S, d_model)``, ``mask`` bool ``(B, 1, 1, S)`` -> ``(B, S, d_model)``."""
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class Decoder(nn.Module):
    """A stack of ``n_layers`` :class:`DecoderLayer` (in ``layers``) and a final ``norm``."""

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        h: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        fast_attention: bool = True,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, h, d_ff, dropout, norm_first, fast_attention)
            for _ in range(n_layers)
        )
        self.norm = _final_norm(d_model, norm_first)

    def forward(
        self, x: Tensor, memory: Tensor, src_mask: Tensor | None, tgt_mask: Tensor | None
    ) -> Tensor:
        """Arguments as for :meth:`DecoderLayer.forward`; returns ``(B, T, d_model)``."""
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class Embeddings(nn.Module):
    """Token embedding table ``lut`` ``(vocab, d_model)``, scaled by ``sqrt(d_model)``.

    The scaling keeps the embeddings on the same scale as the positional encoding (entries
    in ``[-1, 1]``) when the table is initialised with small values.
    """

    def __init__(self, vocab: int, d_model: int) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.scale = math.sqrt(d_model)

    def forward(self, ids: Tensor) -> Tensor:
        """Long ``(B, L)`` -> float ``(B, L, d_model)``."""
        return self.lut(ids) * self.scale


class PositionalEncoding(nn.Module):
    """Add the sinusoidal positional encoding, then apply dropout.

    The table ``pe`` ``(1, max_len, d_model)`` comes from
    :func:`transformer_ref.np_positional.positional_encoding`. It is a buffer, not a parameter:
    it moves with ``.to(device)`` but is never trained, and it is rebuilt rather than saved
    in the ``state_dict``.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        table = torch.from_numpy(positional_encoding(max_len, d_model))
        self.register_buffer("pe", table.unsqueeze(0), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.max_len = max_len

    def forward(self, x: Tensor) -> Tensor:
        """``(B, L, d_model) -> (B, L, d_model)`` with ``L <= max_len``."""
        length = x.size(1)
        if length > self.max_len:
            raise ValueError(
                f"PositionalEncoding: the sequence has {length} positions but max_len is "
                f"{self.max_len}; shorten the input or build the model with max_len >= {length}"
            )
        return self.dropout(x + self.pe[:, :length].to(x.dtype))


class Generator(nn.Module):
    """Final projection ``proj``: ``(..., d_model) -> (..., vocab)`` raw logits.

    No softmax here: the loss (cross-entropy on logits) and decoding apply it as needed.
    """

    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., d_model) -> (..., vocab)``."""
        return self.proj(x)


class EncoderDecoder(nn.Module):
    """The full translation model: embeddings, encoder, decoder and generator.

    ``config`` holds the :func:`make_model` arguments, so ``make_model(**model.config)``
    rebuilds the same architecture (for example to load a saved ``state_dict``).
    """

    def __init__(
        self,
        encoder: Encoder,
        decoder: Decoder,
        src_embed: Embeddings,
        tgt_embed: Embeddings,
        pos_encoding: PositionalEncoding,
        generator: Generator,
        config: dict | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.pos_encoding = pos_encoding  # one module, used for both sides
        self.generator = generator
        self.config = dict(config or {})

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """Long ``(B, S)``, bool ``(B, 1, 1, S)`` -> memory ``(B, S, d_model)``."""
        return self.encoder(self.pos_encoding(self.src_embed(src)), src_mask)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """Long ``(B, T)``, ``(B, S, d_model)``, bool masks -> hidden states ``(B, T, d_model)``."""
        return self.decoder(self.pos_encoding(self.tgt_embed(tgt_in)), memory, src_mask, tgt_mask)

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """Teacher-forced pass: returns logits ``(B, T, tgt_vocab)``."""
        memory = self.encode(src, src_mask)
        return self.generator(self.decode(tgt_in, memory, src_mask, tgt_mask))


def make_model(
    src_vocab: int,
    tgt_vocab: int,
    N: int = 6,
    d_model: int = 512,
    d_ff: int = 2048,
    h: int = 8,
    dropout: float = 0.1,
    *,
    norm_first: bool = False,
    share_embeddings: bool = False,
    tie_weights: bool = False,
    max_len: int = 5000,
    fast_attention: bool = True,
) -> EncoderDecoder:
    """Build an encoder-decoder Transformer (defaults: the paper's base model).

    Args:
        src_vocab, tgt_vocab: vocabulary sizes.
        N: number of encoder layers and of decoder layers.
        d_model, d_ff, h: model width, feed-forward width, number of heads.
        dropout: dropout probability everywhere (sub-layer outputs, embeddings + positions,
            attention weights, feed-forward hidden layer).
        norm_first: pre-LN instead of the paper's post-LN residual connections.
        share_embeddings: one embedding table for source and target (needs equal vocabularies,
            e.g. a joint BPE vocabulary).
        tie_weights: the generator's weight matrix is the target embedding table.
        max_len: longest sequence the positional encoding covers.
        fast_attention: use the fused attention kernel (same results as the math path).

    Returns:
        An :class:`EncoderDecoder` whose weight matrices are Xavier-uniform initialised
        (biases and LayerNorm keep PyTorch's defaults).
    """
    if share_embeddings and src_vocab != tgt_vocab:
        raise ValueError(
            f"make_model: share_embeddings=True needs src_vocab == tgt_vocab, got "
            f"{src_vocab} and {tgt_vocab}; use a joint vocabulary or share_embeddings=False"
        )
    config = dict(
        src_vocab=src_vocab, tgt_vocab=tgt_vocab, N=N, d_model=d_model, d_ff=d_ff, h=h,
        dropout=dropout, norm_first=norm_first, share_embeddings=share_embeddings,
        tie_weights=tie_weights, max_len=max_len, fast_attention=fast_attention,
    )
    layer_args = (d_model, h, d_ff, dropout, norm_first, fast_attention)
    tgt_embed = Embeddings(tgt_vocab, d_model)
    model = EncoderDecoder(
        encoder=Encoder(N, *layer_args),
        decoder=Decoder(N, *layer_args),
        src_embed=tgt_embed if share_embeddings else Embeddings(src_vocab, d_model),
        tgt_embed=tgt_embed,
        pos_encoding=PositionalEncoding(d_model, dropout, max_len),
        generator=Generator(d_model, tgt_vocab),
        config=config,
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    if tie_weights:
        model.generator.proj.weight = model.tgt_embed.lut.weight
    return model
