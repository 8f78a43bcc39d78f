"""build_model: learned or sinusoidal positions, rebuilt from checkpoints and decoded with the
key/value cache; the training settings that choose them."""

import pytest
import torch

from transformer_ref.data.vocab import EOS_ID, PAD_ID
from transformer_ref.decoding import beam_search, greedy_decode
from transformer_ref.generation.cached_beam import cached_beam_search
from transformer_ref.generation.kv_cache import cached_greedy_decode, can_cache
from transformer_ref.masks import make_src_mask, make_tgt_mask, shift_right
from transformer_ref.model.build import build_model
from transformer_ref.model.learned_positional import LearnedPositionalEncoding
from transformer_ref.model.make_model import make_model
from transformer_ref.model.positional import PositionalEncoding
from transformer_ref.training.checkpoint import load_model, save_checkpoint
from transformer_ref.training.presets import get_preset, parse_setting, with_settings

SMALL = dict(N=2, d_model=16, d_ff=32, h=2, dropout=0.0, max_len=40)
VOCAB = 25


def batch(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (3, 7), generator=generator)
    src[:, -1] = EOS_ID
    src[2, 4:] = PAD_ID
    tgt_in = shift_right(torch.randint(4, VOCAB, (3, 6), generator=generator))
    return src, tgt_in, make_src_mask(src), make_tgt_mask(tgt_in)


def test_sinusoidal_is_make_model_itself():
    torch.manual_seed(3)
    built = build_model(VOCAB, VOCAB, **SMALL)
    torch.manual_seed(3)
    plain = make_model(VOCAB, VOCAB, **SMALL)
    assert type(built.pos_encoding) is PositionalEncoding
    assert "positions" not in built.config  # make_model(**config) still rebuilds it
    for (name, a), (_, b) in zip(built.state_dict().items(), plain.state_dict().items(),
                                 strict=True):
        assert torch.equal(a, b), name


def test_learned_positions_are_a_trained_table_of_max_len_rows():
    model = build_model(VOCAB, VOCAB, positions="learned", **SMALL)
    assert isinstance(model.pos_encoding, LearnedPositionalEncoding)
    assert model.config["positions"] == "learned"
    table = model.pos_encoding.pe.weight
    assert table.shape == (SMALL["max_len"], SMALL["d_model"]) and table.requires_grad
    plain = make_model(VOCAB, VOCAB, **SMALL)
    extra = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == SMALL["max_len"] * SMALL["d_model"]
    # Training moves the rows of the positions it sees.
    model(*batch()).sum().backward()
    assert table.grad[:7].abs().sum() > 0 and table.grad[7:].abs().sum() == 0


def test_the_table_carries_the_dropout_of_the_model():
    model = build_model(VOCAB, VOCAB, positions="learned", **{**SMALL, "dropout": 0.3})
    assert model.pos_encoding.dropout.p == 0.3


def test_unknown_positions_are_named():
    with pytest.raises(ValueError, match=r"positions must be one of \('sinusoidal', 'learned'\)"):
        build_model(VOCAB, VOCAB, positions="rotary", **SMALL)


def test_a_checkpoint_rebuilds_learned_positions(tmp_path):
    model = build_model(VOCAB, VOCAB, positions="learned", **SMALL).eval()
    with torch.no_grad():
        model.pos_encoding.pe.weight.normal_()  # as if trained: far from its initialisation
    path = save_checkpoint(tmp_path / "learned.pt", model)
    loaded, checkpoint = load_model(path)
    assert checkpoint["model_config"]["positions"] == "learned"
    assert isinstance(loaded.pos_encoding, LearnedPositionalEncoding)
    with torch.no_grad():
        torch.testing.assert_close(loaded(*batch()), model(*batch()), rtol=0, atol=0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_key_value_cache_decodes_learned_positions(norm_first):
    torch.manual_seed(1)
    model = build_model(VOCAB, VOCAB, positions="learned",
                        **{**SMALL, "norm_first": norm_first}).eval()
    with torch.no_grad():
        model.pos_encoding.pe.weight.mul_(50)  # positions that matter for the outputs
    src, _, src_mask, _ = batch(2)
    assert can_cache(model)
    assert cached_greedy_decode(model, src, src_mask, 12) == greedy_decode(model, src, src_mask,
                                                                           12)
    assert cached_beam_search(model, src, src_mask, 12, 3, 0.6) == beam_search(
        model, src, src_mask, 12, 3, 0.6)


def test_training_settings_choose_the_positions():
    preset = get_preset("multi30k", "cpu")
    assert "positions" not in preset.model  # the paper's sinusoids unless asked
    learned = with_settings(preset, dict([parse_setting("positions=learned"),
                                          parse_setting("max_len=128")]))
    assert learned.model["positions"] == "learned" and learned.model["max_len"] == 128
    with pytest.raises(ValueError, match="setting positions must be one of"):
        with_settings(preset, {"positions": "rotary"})
    with pytest.raises(ValueError, match="setting max_len must be a whole number"):
        with_settings(preset, {"max_len": 1.5})
