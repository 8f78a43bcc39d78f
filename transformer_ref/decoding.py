"""Turning a trained encoder–decoder into output sequences: greedy decoding and beam search.

Both decoders work on a batch of source sentences at once, on whatever device the model and
the inputs live on, and return plain Python lists of token ids without BOS, cut before the
first EOS. Put the model in evaluation mode first (``model.eval()``) so dropout is off.

The model only has to offer ``encode(src, src_mask)``, ``decode(tgt_in, memory, src_mask,
tgt_mask)`` and ``generator(hidden)`` (raw logits), as
:class:`transformer_ref.modules.EncoderDecoder` does. The decoder is re-run on the whole prefix
at every step (no key/value cache), which keeps the code short at a cost of ``O(T^2)`` work;
:mod:`transformer_ref.generation.kv_cache` has the same two decoders with a cache, which the
translate command uses.

This module gathers them in one place to import from, loading each only when it is used (why:
:mod:`transformer_ref.lazy`).
"""

from transformer_ref.lazy import lend

__getattr__, __dir__, __all__ = lend(__name__, {
    "transformer_ref.generation.greedy": ("greedy_decode",),
    "transformer_ref.generation.beam": (
        "beam_search", "length_penalty_factor", "sequence_log_probs"),
})
