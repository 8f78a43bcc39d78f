"""The reference implementation of the course: NumPy building blocks and the PyTorch model.

Every building block can be imported from here::

    from transformer_ref import scaled_dot_product_attention, make_model

Each is loaded on first use, from the module that defines it (see :mod:`transformer_ref.lazy`),
so ``import transformer_ref`` is fast and needs torch only for the PyTorch parts.
"""

from transformer_ref.lazy import lend

__getattr__, __dir__, __all__ = lend(__name__, {
    "transformer_ref.np_positional": ("positional_encoding", "relative_position_matrix"),
    "transformer_ref.np_scaled_attention": (
        "softmax", "causal_mask", "padding_mask", "scaled_dot_product_attention"),
    "transformer_ref.np_attention_head": ("attention_head",),
    "transformer_ref.np_heads": ("split_heads", "merge_heads", "multi_head_attention"),
    "transformer_ref.np_sublayers": ("layer_norm", "feed_forward", "add_and_norm"),
    "transformer_ref.np_encoder": ("encoder_block", "encoder", "ENCODER_BLOCK_KEYS"),
    "transformer_ref.positional": ("PositionalEncoding",),
    "transformer_ref.attention": (
        "MultiHeadAttention", "attention", "fused_attention", "store_attention"),
    "transformer_ref.sublayers": ("PositionwiseFeedForward",),
    "transformer_ref.encoder_layer": ("EncoderLayer",),
    "transformer_ref.encoder": ("Encoder",),
    "transformer_ref.decoder_layer": ("DecoderLayer",),
    "transformer_ref.decoder": ("Decoder",),
    "transformer_ref.embeddings": ("Embeddings",),
    "transformer_ref.generator": ("Generator",),
    "transformer_ref.encoder_decoder": ("EncoderDecoder",),
    "transformer_ref.model": ("make_model",),
    "transformer_ref.build": ("build_model",),
    "transformer_ref.learned_positional": ("LearnedPositionalEncoding",),
    "transformer_ref.lm_block": ("DecoderOnlyBlock",),
    "transformer_ref.language_model": ("LanguageModel",),
    "transformer_ref.sampling": ("sample",),
    "transformer_ref.lm_cache": ("KeyValueCache",),
    "transformer_ref.basic_masks": ("make_src_mask", "subsequent_mask"),
    "transformer_ref.targets": ("make_tgt_mask", "shift_right"),
    "transformer_ref.data": (
        "synthetic_pairs", "load_multi30k", "multi30k_dir", "verify_multi30k",
        "download_multi30k"),
    "transformer_ref.tokenizer": (
        "train_bpe", "load_or_train_tokenizer", "encode", "encode_batch", "decode"),
    "transformer_ref.metrics": ("corpus_bleu", "exact_match"),
    "transformer_ref.greedy": ("greedy_decode",),
    "transformer_ref.beam": ("beam_search",),
    "transformer_ref.translate": ("translate_sentences",),
    "transformer_ref.batching": ("Batch", "bucket_by_tokens", "collate"),
    "transformer_ref.checkpoint": ("load_checkpoint", "load_model", "save_checkpoint"),
    "transformer_ref.device": ("autocast_dtype", "resolve_device"),
    "transformer_ref.losses": ("LabelSmoothingLoss",),
    "transformer_ref.presets": ("get_preset",),
    "transformer_ref.schedule": ("noam_lambda", "noam_rate"),
    "transformer_ref.training": ("TrainConfig", "fit"),
})
