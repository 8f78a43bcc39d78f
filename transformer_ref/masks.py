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

This module gathers them in one place to import from. Each part lives in a module of its own
(named below), so that the grader can give a learner's code the building blocks of earlier
exercises without the reference answer of the exercise being graded.
"""

from transformer_ref.basic_masks import make_src_mask, subsequent_mask
from transformer_ref.targets import make_tgt_mask, shift_right

__all__ = [
    "subsequent_mask", "make_src_mask", "make_tgt_mask", "shift_right",
]
