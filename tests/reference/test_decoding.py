"""Greedy decoding and batched beam search on random and on scripted models."""

import math

import pytest
import torch
from torch import nn

from transformer_ref.data.vocab import EOS_ID, PAD_ID
from transformer_ref.decoding import (
    beam_search,
    greedy_decode,
    length_penalty_factor,
    sequence_log_probs,
)
from transformer_ref.masks import make_src_mask
from transformer_ref.modules import make_model

VOCAB = 12
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def random_model(seed: int, device: str = "cpu") -> nn.Module:
    torch.manual_seed(seed)
    model = make_model(VOCAB, VOCAB, N=1, d_model=16, d_ff=32, h=2, dropout=0.0)
    return model.to(device).eval()


def random_source(seed: int, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (5, 7), generator=generator)
    src[:, -1] = EOS_ID
    src[0, 4:] = PAD_ID  # a shorter sentence in the batch
    src[0, 3] = EOS_ID
    src = src.to(device)
    return src, make_src_mask(src)


def score(model, src, src_mask, hypothesis: list[int], max_len: int) -> float:
    """Log-probability of one decoded hypothesis (EOS added unless it was cut by max_len)."""
    ids = hypothesis + [EOS_ID] if len(hypothesis) < max_len else hypothesis
    tgt = torch.tensor([ids], device=src.device)
    return sequence_log_probs(model, src, src_mask, tgt).item()


class ScriptedModel(nn.Module):
    """A stand-in model whose next-token distribution is looked up from the prefix.

    ``table`` maps a prefix (tuple of generated ids, BOS excluded) to ``{token: probability}``;
    the rest of the probability mass is spread evenly over the other tokens. Unknown prefixes
    put 0.9 on EOS. ``decode_calls`` counts decoder runs.
    """

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], vocab: int = 10):
        super().__init__()
        self.table, self.vocab, self.decode_calls = table, vocab, 0
        self.config = {"max_len": 100}
        self._prefixes: list[tuple[int, ...]] = []

    def encode(self, src, src_mask):
        return torch.zeros(src.size(0), src.size(1), 1, device=src.device)

    def decode(self, tgt_in, memory, src_mask, tgt_mask):
        # The hidden state at (b, t) is the index of the prefix tgt_in[b, 1 : t + 1] in a list
        # that the generator reads back.
        self.decode_calls += 1
        rows = tgt_in.tolist()
        self._prefixes = [tuple(row[1 : t + 1]) for row in rows for t in range(len(row))]
        index = torch.arange(len(self._prefixes), dtype=torch.float, device=tgt_in.device)
        return index.view(tgt_in.size(0), tgt_in.size(1), 1)

    def generator(self, hidden):
        logits = []
        for i in hidden[..., 0].reshape(-1).long().tolist():
            probs = self.table.get(self._prefixes[i], {EOS_ID: 0.9})
            rest = (1.0 - sum(probs.values())) / (self.vocab - len(probs))
            logits.append([math.log(probs.get(t, rest)) for t in range(self.vocab)])
        return torch.tensor(logits, device=hidden.device).view(*hidden.shape[:-1], self.vocab)


A, B, C, D = 4, 5, 6, 7
# Short [A] has the larger log-probability (0.5 * 0.5 = 0.25, log -1.386); long [B, C, D]
# has 0.3 * 0.9^3 = 0.219 (log -1.520) but wins once lengths are normalised (alpha = 1).
LENGTH_CASE = {
    (): {A: 0.5, B: 0.3},
    (A,): {EOS_ID: 0.5},
    (B,): {C: 0.9},
    (B, C): {D: 0.9},
    (B, C, D): {EOS_ID: 0.9},
}


def one_source():
    src = torch.tensor([[A, EOS_ID]])
    return src, make_src_mask(src)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_beam_of_one_is_greedy(device, alpha):
    for seed in range(4):
        model = random_model(seed, device)
        src, src_mask = random_source(seed, device)
        greedy = greedy_decode(model, src, src_mask, max_len=9)
        assert beam_search(model, src, src_mask, 9, beam_size=1, length_penalty=alpha) == greedy


@pytest.mark.parametrize("device", DEVICES)
def test_beam_finds_at_least_the_greedy_probability(device):
    for seed in range(6):
        model = random_model(seed, device)
        src, src_mask = random_source(seed, device)
        greedy = greedy_decode(model, src, src_mask, max_len=8)
        beam = beam_search(model, src, src_mask, 8, beam_size=4, length_penalty=0.0)
        for i in range(src.size(0)):
            row = (src[i : i + 1], src_mask[i : i + 1])
            assert score(model, *row, beam[i], 8) >= score(model, *row, greedy[i], 8) - 1e-5


def test_beam_batches_sentences_independently():
    model = random_model(1)
    src, src_mask = random_source(1)
    batched = beam_search(model, src, src_mask, 8, beam_size=3)
    alone = [beam_search(model, src[i : i + 1], src_mask[i : i + 1], 8, beam_size=3)[0]
             for i in range(src.size(0))]
    assert batched == alone


def test_decoders_stop_at_eos():
    model = ScriptedModel({(): {A: 0.9}, (A,): {B: 0.9}, (A, B): {EOS_ID: 0.9}})
    src, src_mask = one_source()
    assert greedy_decode(model, src, src_mask, max_len=50) == [[A, B]]
    assert model.decode_calls == 3, "no steps after every sentence has ended"
    model.decode_calls = 0
    assert beam_search(model, src, src_mask, 50, beam_size=3) == [[A, B]]
    assert model.decode_calls < 50


@pytest.mark.parametrize("max_len", [1, 3, 6])
def test_max_len_is_respected(max_len):
    model = random_model(0)
    with torch.no_grad():
        model.generator.proj.bias[EOS_ID] = -1e4  # the model never wants to stop
    src, src_mask = random_source(0)
    for out in (greedy_decode(model, src, src_mask, max_len),
                beam_search(model, src, src_mask, max_len, beam_size=3)):
        assert [len(ids) for ids in out] == [max_len] * src.size(0)
        assert all(EOS_ID not in ids for ids in out)


def test_length_penalty_changes_the_choice():
    model = ScriptedModel(LENGTH_CASE)
    src, src_mask = one_source()
    assert greedy_decode(model, src, src_mask, 10) == [[A]]
    assert beam_search(model, src, src_mask, 10, beam_size=2, length_penalty=0.0) == [[A]]
    assert beam_search(model, src, src_mask, 10, beam_size=2, length_penalty=1.0) == [[B, C, D]]
    # The arithmetic behind it, with lengths counting EOS.
    short, long = math.log(0.25), math.log(0.3 * 0.9**3)
    assert short > long
    lp = length_penalty_factor(torch.tensor([2, 4]), 1.0)
    assert short / lp[0].item() < long / lp[1].item()


def test_length_penalty_formula():
    lengths = torch.tensor([1, 5, 10])
    expected = torch.tensor([((5 + n) / 6) ** 0.6 for n in (1, 5, 10)])
    torch.testing.assert_close(length_penalty_factor(lengths, 0.6), expected)
    assert torch.all(length_penalty_factor(lengths, 0.0) == 1.0)


def test_sequence_log_probs_matches_step_by_step_scores():
    model = ScriptedModel(LENGTH_CASE)
    src, src_mask = one_source()
    tgt = torch.tensor([[B, C, D, EOS_ID], [A, EOS_ID, PAD_ID, PAD_ID]])
    src2, mask2 = src.repeat(2, 1), src_mask.repeat(2, 1, 1, 1)
    torch.testing.assert_close(
        sequence_log_probs(model, src2, mask2, tgt),
        torch.tensor([math.log(0.3 * 0.9**3), math.log(0.25)]),
    )


def test_bad_arguments_are_explained():
    model = random_model(0)
    src, src_mask = random_source(0)
    with pytest.raises(ValueError, match="src_mask must have shape"):
        greedy_decode(model, src, src_mask[:, 0], 5)
    with pytest.raises(TypeError, match="src must be a Long tensor"):
        beam_search(model, src.float(), src_mask, 5)
    with pytest.raises(ValueError, match="beam_size must be at least 1"):
        beam_search(model, src, src_mask, 5, beam_size=0)
    with pytest.raises(ValueError, match="max_len must be at least 1"):
        greedy_decode(model, src, src_mask, 0)
    with pytest.raises(ValueError, match="positional encoding covers 5000"):
        greedy_decode(model, src, src_mask, 5000)
