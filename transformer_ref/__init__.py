"""The reference implementation of the course: NumPy building blocks and the PyTorch model.

The package is grouped by topic: ``numpy/`` (chapters 1 to 6), ``model/`` (the PyTorch models
and their masks), ``generation/`` (decoding and sampling), ``data/``, ``training/`` and
``figures/``; ``python -m transformer_ref.train`` and ``python -m transformer_ref.translate``
are the command lines. The gathering modules on top (:mod:`transformer_ref.np_attention`,
:mod:`~transformer_ref.np_layers`, :mod:`~transformer_ref.modules`,
:mod:`~transformer_ref.masks` and :mod:`~transformer_ref.decoding`) are the short imports the
chapters use, and the package lends every name they lend::

    from transformer_ref import scaled_dot_product_attention, make_model

Each is loaded on first use, from the module that defines it (see :mod:`transformer_ref.lazy`),
so ``import transformer_ref`` is fast and needs torch only for the PyTorch parts.
"""

from transformer_ref import decoding, masks, modules, np_attention, np_layers
from transformer_ref.lazy import lend

GATHERING_MODULES = (np_attention, np_layers, modules, masks, decoding)

__getattr__, __dir__, __all__ = lend(
    __name__, {gathering.__name__: tuple(gathering.__all__) for gathering in GATHERING_MODULES})
