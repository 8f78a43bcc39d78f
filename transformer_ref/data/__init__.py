"""The data the models read: the synthetic tasks and Multi30k, the special token ids, the BPE
tokenizer and batching.

``python -m transformer_ref.data download multi30k`` fetches Multi30k (see
:mod:`transformer_ref.data.datasets`).
"""
