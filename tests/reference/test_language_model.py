"""The decoder-only language model of chapter 11: the block, the model, sampling, the key/value
cache and the training helpers."""

from __future__ import annotations

import pytest
import torch

from transformer_ref.data.tokenizer import train_bpe
from transformer_ref.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_ref.generation.lm_cache import KeyValueCache
from transformer_ref.generation.sampling import filter_logits, pick_next, sample
from transformer_ref.model.language_model import LanguageModel
from transformer_ref.model.lm_block import DecoderOnlyBlock
from transformer_ref.training.lm_training import (
    LMTrainConfig,
    lm_batches,
    load_language_model,
    next_token_loss,
    save_language_model,
    train_language_model,
)


def _model(**changes) -> LanguageModel:
    torch.manual_seed(0)
    config = dict(vocab=40, N=2, d_model=16, d_ff=24, h=4, dropout=0.1, max_len=12) | changes
    return LanguageModel(**config).double().eval()


def test_the_block_is_causal_and_pre_ln():
    torch.manual_seed(0)
    block = DecoderOnlyBlock(16, 4, 32, dropout=0.0).eval()
    x = torch.randn(2, 6, 16)
    changed = x.clone()
    changed[:, 4:] += 1.0
    assert torch.allclose(block(x)[:, :4], block(changed)[:, :4], atol=1e-6)
    assert not torch.allclose(block(x)[:, 4:], block(changed)[:, 4:])
    with torch.no_grad():  # pre-LN: silenced sub-layers leave the stream as it was
        for linear in (block.self_attn.w_o, block.feed_forward.w_2):
            linear.weight.zero_()
            linear.bias.zero_()
    assert torch.equal(block(x), x)


def test_the_model_ties_its_table_keeps_its_config_and_is_causal():
    model = _model()
    assert model.generator.proj.weight is model.embed.lut.weight
    untied = _model(tie_weights=False)
    assert untied.generator.proj.weight is not untied.embed.lut.weight
    assert LanguageModel(**model.config).config == model.config
    ids = torch.randint(0, 40, (3, 10))
    logits = model(ids)
    assert logits.shape == (3, 10, 40)
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 40
    assert torch.allclose(model(changed)[:, :6], logits[:, :6])
    with pytest.raises(ValueError, match="max_len=12"):
        model(torch.zeros(1, 13, dtype=torch.long))


def test_the_cache_gives_the_logits_of_the_whole_sequence():
    model = _model()
    ids = torch.randint(0, 40, (3, 12))
    full = model(ids)
    cache = KeyValueCache(model)
    pieces = [cache(ids[:, :4]), cache(ids[:, 4:7])] + [cache(ids[:, t : t + 1])
                                                        for t in range(7, 12)]
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=1e-10)
    assert cache.length == 12
    with pytest.raises(ValueError, match="max_len=12"):
        cache(ids[:, :1])


def test_the_cache_follows_reordered_rows():
    model = _model()
    ids = torch.randint(0, 40, (3, 9))
    cache = KeyValueCache(model)
    cache(ids[:, :5])
    rows = torch.tensor([2, 2, 0, 1])
    cache.reorder(rows)
    moved = ids[rows]
    assert torch.allclose(cache(moved[:, 5:9]), model(moved)[:, 5:9], atol=1e-10)
    with pytest.raises(ValueError, match="reorder"):
        cache(ids[:, :1])  # 3 rows, but the cache holds 4


def test_top_k_and_top_p_keep_the_right_tokens():
    logits = torch.log(torch.tensor([[0.05, 0.4, 0.3, 0.15, 0.1]], dtype=torch.float64))
    kept = torch.isfinite(filter_logits(logits, top_k=2))[0].tolist()
    assert kept == [False, True, True, False, False]
    # 0.4 + 0.3 = 0.7 < 0.75: the token that crosses p (0.15) is kept, no more.
    kept = torch.isfinite(filter_logits(logits, top_p=0.75))[0].tolist()
    assert kept == [False, True, True, True, False]
    assert torch.isfinite(filter_logits(logits, top_k=9, top_p=1.0)).all()
    assert torch.isfinite(filter_logits(logits, top_p=0.1)).sum() == 1  # one token at least
    sharp = filter_logits(logits, temperature=0.5).softmax(-1)
    assert torch.allclose(sharp, logits.mul(2).softmax(-1))
    for bad in (dict(temperature=0), dict(top_k=0), dict(top_p=1.5)):
        with pytest.raises((ValueError, TypeError)):
            filter_logits(logits, **bad)


def test_sampling_is_reproducible_crops_the_context_and_keeps_the_prompt():
    model = _model()
    prompt = torch.randint(0, 40, (3, 4))

    def draw(seed: int) -> torch.Tensor:
        return sample(model, prompt, 15, temperature=0.9, top_k=8, top_p=0.9,
                      generator=torch.Generator().manual_seed(seed))

    first = draw(1)
    torch.manual_seed(123)  # the global state plays no part
    assert torch.equal(first, draw(1))
    assert not torch.equal(first, draw(2))
    assert first.shape == (3, 19) and torch.equal(first[:, :4], prompt)
    assert torch.equal(sample(model, prompt, 0), prompt)
    counts = torch.bincount(pick_next(torch.tensor([[0.0, 2.0]]).expand(4000, 2),
                                      generator=torch.Generator().manual_seed(0))[:, 0])
    assert abs(counts[1].item() / 4000 - 1 / (1 + torch.e ** -2)) < 0.03


def test_next_token_loss_ignores_padding_and_batches_are_padded_on_the_right():
    model = _model(dropout=0.0)
    sequences = [[BOS_ID, 5, 6, EOS_ID], [BOS_ID, 7, EOS_ID], [BOS_ID, 9, 10, 11, 12, EOS_ID]]
    batches = lm_batches(sequences, max_tokens=100, shuffle=False)  # shortest first
    assert len(batches) == 1 and batches[0].shape == (3, 6)
    assert batches[0][0].tolist() == [BOS_ID, 7, EOS_ID, PAD_ID, PAD_ID, PAD_ID]
    alone = next_token_loss(model, torch.tensor([sequences[1]]))
    logits = model(batches[0][:, :-1])
    by_hand = torch.nn.functional.cross_entropy(logits[0, :2], batches[0][0, 1:3])
    assert alone.item() == pytest.approx(by_hand.item(), rel=1e-6)
    assert next_token_loss(model, batches[0]).item() == pytest.approx(
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), batches[0][:, 1:].flatten(),
                                          ignore_index=PAD_ID).item())


def test_training_lowers_the_loss_and_the_saved_model_loads_back(tmp_path):
    sentences = ["a dog runs on the grass.", "a man rides a bike.", "two dogs play.",
                 "a woman reads a book."] * 8
    tok = train_bpe(sentences, vocab_size=64)
    train = [[BOS_ID, *tok.encode(s).ids, EOS_ID] for s in sentences]
    torch.manual_seed(0)
    model = LanguageModel(tok.get_vocab_size(), N=1, d_model=16, d_ff=32, h=2, dropout=0.0,
                          max_len=32)
    reports = train_language_model(model, train, train[:4], LMTrainConfig(
        steps=60, max_tokens=200, lr=1e-2, warmup=5, eval_every=30))
    assert [r["step"] for r in reports] == [30, 60]
    assert 0 < reports[0]["tokens"] <= 30 * 200 and reports[1]["tokens"] > reports[0]["tokens"]
    assert reports[-1]["val_loss"] < 1.0 < reports[0]["train_loss"]
    path = save_language_model(tmp_path / "lm.pt", model, tok, step=60, reports=reports,
                               metrics={"val_loss": reports[-1]["val_loss"]})
    loaded, loaded_tok, record = load_language_model(path)
    assert record["model"]["embed.lut.weight"].dtype == torch.float16
    assert loaded_tok.get_vocab_size() == tok.get_vocab_size()
    assert record["extra"]["reports"] == reports and not loaded.training
    ids = torch.tensor([train[0]])
    assert torch.allclose(loaded(ids), model(ids), atol=0.05)
    with pytest.raises(ValueError, match="not a language model"):
        bad = torch.load(path, weights_only=True) | {"task": "multi30k"}
        torch.save(bad, tmp_path / "other.pt")
        load_language_model(tmp_path / "other.pt")
