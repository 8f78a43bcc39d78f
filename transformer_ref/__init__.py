"""The reference implementation of the course: NumPy building blocks and the PyTorch model.

The NumPy functions of chapters 1–6 are imported here directly::

    from transformer_ref import scaled_dot_product_attention

The PyTorch classes and helpers (``make_model``, ``MultiHeadAttention``, ...) are loaded on
first use, so that ``import transformer_ref`` stays fast and does not need torch for the NumPy
chapters and the autograder.
"""

from importlib import import_module

from transformer_ref.np_attention import (
    attention_head,
    causal_mask,
    merge_heads,
    multi_head_attention,
    padding_mask,
    scaled_dot_product_attention,
    softmax,
    split_heads,
)
from transformer_ref.np_layers import (
    ENCODER_BLOCK_KEYS,
    add_and_norm,
    encoder,
    encoder_block,
    feed_forward,
    layer_norm,
)
from transformer_ref.np_positional import positional_encoding, relative_position_matrix

# name -> submodule holding it; imported by __getattr__ on first access.
_LAZY = {
    **dict.fromkeys(
        (
            "PositionalEncoding",
            "MultiHeadAttention",
            "PositionwiseFeedForward",
            "EncoderLayer",
            "DecoderLayer",
            "Encoder",
            "Decoder",
            "Embeddings",
            "Generator",
            "EncoderDecoder",
            "make_model",
            "attention",
            "fused_attention",
            "store_attention",
        ),
        "modules",
    ),
    **dict.fromkeys(("make_src_mask", "make_tgt_mask", "subsequent_mask", "shift_right"), "masks"),
    **dict.fromkeys(
        (
            "synthetic_pairs",
            "load_multi30k",
            "multi30k_dir",
            "verify_multi30k",
            "download_multi30k",
        ),
        "data",
    ),
    **dict.fromkeys(
        ("train_bpe", "load_or_train_tokenizer", "encode", "encode_batch", "decode"), "tokenizer"
    ),
    **dict.fromkeys(("corpus_bleu", "exact_match"), "metrics"),
    **dict.fromkeys(("greedy_decode", "beam_search"), "decoding"),
    "translate_sentences": "translate",
    **dict.fromkeys(("Batch", "bucket_by_tokens", "collate"), "batching"),
    **dict.fromkeys(("load_checkpoint", "load_model", "save_checkpoint"), "checkpoint"),
    **dict.fromkeys(("autocast_dtype", "resolve_device"), "device"),
    "LabelSmoothingLoss": "losses",
    "get_preset": "presets",
    **dict.fromkeys(("noam_lambda", "noam_rate"), "schedule"),
    **dict.fromkeys(("TrainConfig", "fit"), "training"),
    "LearnedPositionalEncoding": "learned_positional",
    "DecoderOnlyBlock": "lm_block",
    "LanguageModel": "language_model",
    "sample": "sampling",
    "KeyValueCache": "lm_cache",
}

__all__ = [
    "positional_encoding",
    "relative_position_matrix",
    "softmax",
    "causal_mask",
    "padding_mask",
    "scaled_dot_product_attention",
    "attention_head",
    "split_heads",
    "merge_heads",
    "multi_head_attention",
    "layer_norm",
    "feed_forward",
    "add_and_norm",
    "encoder_block",
    "encoder",
    "ENCODER_BLOCK_KEYS",
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(f"transformer_ref.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'transformer_ref' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
