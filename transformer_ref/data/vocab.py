"""Special token ids shared by the synthetic tasks, the BPE tokenizer, batching and decoding.

Every sequence the reference code handles is a list of integer ids in which

* ``PAD_ID`` fills positions after the end of a shorter sequence (never attended to),
* ``BOS_ID`` starts the decoder input (added by :func:`transformer_ref.masks.shift_right`),
* ``EOS_ID`` ends every source and target sequence,
* ``UNK_ID`` stands for a symbol the tokenizer does not know.
"""

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
