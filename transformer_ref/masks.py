"""Boolean attention masks and the decoder-input shift for the PyTorch model.

Every mask follows one convention: ``True`` marks a key position that a query **may attend to**.
The shapes are chosen to broadcast against the attention scores ``(B, h, n_q, n_k)``:

* source mask ``(B, 1, 1, S)``: hide padded source tokens from every query and every head;
* target mask ``(B, 1, T, T)``: a query sees itself and earlier positions (causal) *and* only
  keys that are not padding.

A worked example with ``PAD_ID = 0``::

    >>> tgt_in = torch.tensor([[1, 7, 0]])
    >>> make_tgt_mask(tgt_in)[0, 0].int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 0]], dtype=torch.int32)

This module gathers them in one place to import from, loading each only when it is used (why:
:mod:`transformer_ref.lazy`).
"""

from transformer_ref.lazy import lend

__getattr__, __dir__, __all__ = lend(__name__, {
    "transformer_ref.model.basic_masks": ("subsequent_mask", "make_src_mask"),
    "transformer_ref.model.targets": ("make_tgt_mask", "shift_right"),
})
