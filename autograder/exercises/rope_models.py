"""What the chapter 12 checks hand to a learner's cached attention: the weights of a
grouped-query attention with rotary positions, and nothing that computes it.

The learner's code runs in its own process (in a class, its own kernel), which builds this
module from the settings and weights the grader sends (see ``builders`` of
:class:`autograder.exercises.registry.Exercise`); it is part of a class's view while chapter
12 is open, so it has no forward pass: that is the exercise.
"""

from __future__ import annotations

from torch import nn


class AttentionWeights(nn.Module):
    """The projections and sizes of a ``GroupedQueryAttention``: ``w_q`` ``(d_model ->
    n_heads * d_k)``, ``w_k``, ``w_v`` ``(d_model -> n_kv_heads * d_k)``, ``w_o``
    ``(n_heads * d_k -> d_model)``, without biases; ``n_heads``, ``n_kv_heads``, ``d_k``,
    ``base`` (RoPE's frequency base) and ``config`` (the constructor's arguments)."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, base: float) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.base = n_heads, n_kv_heads, base
        self.d_k = d_model // n_heads
        self.config = dict(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, base=base)
        self.w_q = nn.Linear(d_model, n_heads * self.d_k, bias=False)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=False)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=False)
        self.w_o = nn.Linear(n_heads * self.d_k, d_model, bias=False)
