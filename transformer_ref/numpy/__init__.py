"""The NumPy building blocks of chapters 1 to 6, one exercise per module.

Import them from the gathering modules :mod:`transformer_ref.np_attention` and
:mod:`transformer_ref.np_layers` (or :mod:`transformer_ref.numpy.positional` for chapter 1).
"""
