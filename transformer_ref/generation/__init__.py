"""Turning trained models into sequences: greedy decoding, beam search, key/value caches,
batched translation and sampling from a language model.

Import greedy decoding and beam search from the gathering module
:mod:`transformer_ref.decoding`.
"""
