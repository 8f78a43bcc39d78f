"""Other layouts of the same attention weights, mapped to the course's names.

The checks copy the reference's weights into a learner's module by name (``w_q``, ``w_k``,
``w_v``, ``w_o`` in every attention layer). Two other layouts hold exactly these weights and
are just as right:

* one fused projection of the input to queries, keys and values: a linear layer whose weight
  is ``(3 d, d)``, the three ``(d, d)`` blocks stacked in the order q, k, v (nanoGPT's
  ``c_attn``, the UvA tutorials' ``qkv_proj``), next to the course's ``w_o``;
* ``torch.nn.MultiheadAttention``: the same fused weight as the parameters ``in_proj_weight``
  and ``in_proj_bias``, and ``out_proj`` for ``w_o``.

:func:`layout_mapping` recognises them from the names and shapes of a learner's state,
:func:`adapt_state` writes the reference's state in the learner's names, and
:func:`learner_gradient` reads the gradient of a reference parameter out of the learner's.
Names of another naming scheme (GPT-2's ``ln_1``, ``attn``, ``mlp``) are not another layout
of the weights; :func:`naming_advice` tells the learner how to rename them.

torch is imported inside the functions, so importing this module stays torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

QKV = ("w_q", "w_k", "w_v")
# A reference name -> (the learner's name, which third of a fused tensor or None for all of it).
LayoutMapping = dict[str, tuple[str, int | None]]


def _fused_candidates(prefix: str, rows: int, columns: int,
                      learner_state: Mapping[str, Any], taken: set[str]) -> list[str]:
    """Learner weights below ``prefix`` of shape ``(3 * rows, columns)`` that the reference
    does not know: a fused projection."""
    def directly_below(key: str) -> bool:  # "<prefix>qkv.weight" or "<prefix>in_proj_weight"
        rest = key[len(prefix):]
        return rest == "in_proj_weight" or (rest.endswith(".weight") and rest.count(".") == 1)

    return [k for k, v in learner_state.items()
            if k.startswith(prefix) and k not in taken and directly_below(k)
            and tuple(v.shape) == (3 * rows, columns)]


def layout_mapping(reference_keys: Iterable[str], learner_state: Mapping[str, Any],
                   reference_state: Mapping[str, Any]) -> LayoutMapping:
    """The reference names that the learner's module holds under another layout (see the
    module docstring), each with its place in the learner's state; empty when the names
    agree or no known layout explains them."""
    reference_keys = set(reference_keys)
    mapping: LayoutMapping = {}
    for key in sorted(reference_keys):
        if not (key == "w_q.weight" or key.endswith(".w_q.weight")) or key in learner_state:
            continue
        prefix = key[: -len("w_q.weight")]
        rows, columns = reference_state[key].shape
        fused = _fused_candidates(prefix, rows, columns, learner_state, reference_keys)
        if len(fused) != 1:
            continue
        weight = fused[0]
        bias = (weight[: -len("weight")] + "bias" if weight.endswith(".weight")
                else prefix + "in_proj_bias")
        for part, name in enumerate(QKV):
            mapping[f"{prefix}{name}.weight"] = (weight, part)
            if f"{prefix}{name}.bias" in reference_keys and bias in learner_state:
                mapping[f"{prefix}{name}.bias"] = (bias, part)
        for end in ("weight", "bias"):
            if f"{prefix}w_o.{end}" not in learner_state and f"{prefix}out_proj.{end}" in \
                    learner_state:
                mapping[f"{prefix}w_o.{end}"] = (f"{prefix}out_proj.{end}", None)
    return mapping


def adapt_state(reference_state: Mapping[str, Tensor], learner_state: Mapping[str, Any]
                ) -> dict[str, Tensor]:
    """``reference_state`` in the learner's names (fused projections concatenated); the same
    state when no other layout applies."""
    import torch

    mapping = layout_mapping(reference_state, learner_state, reference_state)
    if not mapping:
        return dict(reference_state)
    adapted = {k: v for k, v in reference_state.items() if k not in mapping}
    parts: dict[str, list[Tensor | None]] = {}
    for key, (target, part) in mapping.items():
        if part is None:
            adapted[target] = reference_state[key]
        else:
            parts.setdefault(target, [None, None, None])[part] = reference_state[key]
    for target, pieces in parts.items():
        if all(p is not None for p in pieces):
            adapted[target] = torch.cat(pieces, dim=0)
    return adapted


def learner_gradient(name: str, learner_parameters: Mapping[str, Any],
                     mapping: LayoutMapping) -> Tensor | None:
    """The gradient of the reference parameter ``name`` in the learner's module (a third of
    a fused projection's gradient where the learner fuses), or None when it has none."""
    target, part = mapping.get(name, (name, None))
    parameter = learner_parameters.get(target)
    grad = None if parameter is None else parameter.grad
    if grad is None or part is None:
        return grad
    return grad.chunk(3, dim=0)[part]


# GPT-2's (and nanoGPT's, minGPT's) names and the course's.
GPT2_NAMES = {
    "ln_1": "norm1", "ln_2": "norm2", "attn": "self_attn (a fused c_attn may stay; c_proj -> w_o)",
    "mlp": "feed_forward (c_fc -> w_1, c_proj -> w_2)", "wte": "embed.lut",
    "wpe": "pos_encoding.pe", "h": "layers", "ln_f": "norm", "lm_head": "generator.proj",
}


def naming_advice(learner_keys: Iterable[str]) -> str:
    """A sentence for a learner whose names follow GPT-2's, or ``""``."""
    parts = {part for key in learner_keys for part in key.split(".")}
    used = [name for name in GPT2_NAMES if name in parts]
    if not {"ln_1", "ln_f", "wte", "c_attn", "c_fc", "lm_head"} & parts:
        return ""
    renames = "; ".join(f"{name} -> {GPT2_NAMES[name]}" for name in used)
    return (f" Your names follow GPT-2's (nanoGPT's, minGPT's); the course's modules name "
            f"the same parts differently: {renames}.")
