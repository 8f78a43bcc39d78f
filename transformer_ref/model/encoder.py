"""The encoder: a stack of encoder layers and, for pre-LN layers, a final layer norm.

Conventions (shapes, masks): see :mod:`transformer_ref.modules`.
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer_ref.model.sublayers import final_norm


class Encoder(nn.Module):
    """A stack of ``n_layers`` layers (in ``layers``) and a final ``norm``.

    The layers are :class:`transformer_ref.model.encoder_layer.EncoderLayer` unless ``layer`` names
    another class with the same constructor arguments (``d_model, h, d_ff, dropout,
    norm_first, fast_attention``) and the same ``forward``.
    """

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        h: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        fast_attention: bool = True,
        layer: type[nn.Module] | None = None,
    ) -> None:
        super().__init__()
        if layer is None:
            # Imported here, not above: a class's learners, whose view of the course lacks the
            # answer of an open chapter, stack their own layer (``layer=MyEncoderLayer``).
            from transformer_ref.model.encoder_layer import EncoderLayer

            layer = EncoderLayer
        self.layers = nn.ModuleList(
            layer(d_model, h, d_ff, dropout, norm_first, fast_attention) for _ in range(n_layers)
        )
        self.norm = final_norm(d_model, norm_first)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``x`` ``(B, S, d_model)``, ``mask`` bool ``(B, 1, 1, S)`` -> ``(B, S, d_model)``."""
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)
