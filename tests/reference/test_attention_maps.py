"""Attention maps of one translated sentence, and show_attention's figure."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from transformer_ref.data.datasets import load_multi30k
from transformer_ref.data.tokenizer import encode, train_bpe
from transformer_ref.figures.attention_maps import attention_maps, show_attention
from transformer_ref.generation.greedy import greedy_decode
from transformer_ref.modules import make_model
from transformer_ref.translate import translate_sentences

SENTENCE = "Ein Hund rennt über die Wiese."


@pytest.fixture(scope="module")
def translator(multi30k_dir):
    pairs = load_multi30k("train", multi30k_dir)[:1000]
    tok = train_bpe([s for pair in pairs for s in pair], vocab_size=300)
    torch.manual_seed(0)
    size = tok.get_vocab_size()
    model = make_model(size, size, N=2, d_model=16, d_ff=32, h=2, dropout=0.0, max_len=30)
    return model.eval(), tok


def test_maps_belong_to_the_translation_shown(translator):
    model, tok = translator
    maps = attention_maps(model, tok, SENTENCE, beam_size=3)
    assert maps.translation == translate_sentences(model, tok, [SENTENCE], beam_size=3)[0]
    s, t = len(encode(tok, SENTENCE)), len(maps.output_tokens)
    assert maps.source_tokens == [tok.id_to_token(i) for i in encode(tok, SENTENCE)]
    assert maps.output_tokens[-1] == "<eos>" and maps.input_tokens[0] == "<bos>"
    assert maps.input_tokens[1:] == maps.output_tokens[:-1]
    assert maps.cross.shape == (2, 2, t, s)
    assert maps.encoder.shape == (2, 2, s, s) and maps.decoder.shape == (2, 2, t, t)
    for weights in (maps.cross, maps.encoder, maps.decoder):
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(maps.decoder, k=1) == 0)  # causal
    # The model is left as it was: no weights kept, fast attention again.
    layer = model.decoder.layers[0].cross_attn
    assert layer.attn_weights is None and not layer.store_attention


def test_a_decoder_of_ones_own_translates(translator):
    """A learner's own decoder (chapter 10 passes its beam search) gives the translation."""
    model, tok = translator
    calls = []

    def my_greedy(model, src, src_mask, max_len):
        calls.append(max_len)
        return greedy_decode(model, src, src_mask, max_len)

    maps = attention_maps(model, tok, SENTENCE, decoder=my_greedy)
    assert calls and maps.translation == translate_sentences(model, tok, [SENTENCE],
                                                             beam_size=1)[0]


def test_show_attention_labels_every_kind(translator):
    model, tok = translator
    maps = attention_maps(model, tok, SENTENCE)
    for kind, rows, columns in (("cross", maps.output_tokens, maps.source_tokens),
                                ("encoder", maps.source_tokens, maps.source_tokens),
                                ("decoder", maps.output_tokens, maps.input_tokens)):
        fig = show_attention(model, tok, SENTENCE, kind)
        panels = [ax for ax in fig.axes if ax.images]
        assert len(panels) == 4
        assert [label.get_text() for label in panels[0].get_yticklabels()] == rows
        assert [label.get_text() for label in panels[-1].get_xticklabels()] == columns
        assert maps.translation in fig.get_suptitle().replace("\n", " ")
        plt.close(fig)


def test_bad_arguments_are_named(translator):
    model, tok = translator
    with pytest.raises(ValueError, match="kind must be one of"):
        show_attention(model, tok, SENTENCE, "self")
    with pytest.raises(ValueError, match="non-empty str"):
        attention_maps(model, tok, "  ")
