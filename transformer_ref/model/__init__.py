"""The PyTorch models: the encoder-decoder of chapters 7 and 8, its masks, and the decoder-only
language model of chapter 11, one exercise per module.

Import the encoder-decoder's parts from the gathering modules :mod:`transformer_ref.modules`
and :mod:`transformer_ref.masks`.
"""
