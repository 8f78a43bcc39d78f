"""The translate command line and translate_sentences, with a tiny untrained model."""

import copy
import subprocess
import sys

import pytest
import torch

from transformer_ref import translate
from transformer_ref.data.datasets import load_multi30k
from transformer_ref.data.tokenizer import train_bpe
from transformer_ref.modules import make_model
from transformer_ref.training.checkpoint import save_checkpoint

SENTENCES = [
    "Ein Hund rennt über die Wiese.",
    "Zwei Männer.",
    "Eine Frau mit einem roten Hut sitzt auf einer Bank im Park und liest ein Buch.",
]


@pytest.fixture(scope="module")
def tok(multi30k_dir):
    pairs = load_multi30k("train", multi30k_dir)[:1000]
    return train_bpe([s for pair in pairs for s in pair], vocab_size=300)


@pytest.fixture(scope="module")
def model(tok):
    torch.manual_seed(0)
    size = tok.get_vocab_size()
    return make_model(size, size, N=1, d_model=16, d_ff=32, h=2, dropout=0.0).eval()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, model, tok):
    folder = tmp_path_factory.mktemp("checkpoints")
    multi30k = save_checkpoint(folder / "mt.pt", model, task="multi30k", tokenizer=tok.to_str())
    reverse = save_checkpoint(folder / "reverse.pt", model, task="reverse")
    return multi30k, reverse


def test_translate_sentences_keeps_the_order(model, tok):
    together = translate.translate_sentences(model, tok, SENTENCES, beam_size=1, max_len=6)
    alone = [
        translate.translate_sentences(model, tok, [s], beam_size=1, max_len=6)[0]
        for s in SENTENCES
    ]
    assert together == alone
    assert all(isinstance(t, str) for t in together)
    beams = translate.translate_sentences(model, tok, SENTENCES, beam_size=3, max_len=6)
    assert len(beams) == len(SENTENCES)


def test_cli_prints_one_translation_per_sentence(checkpoints, capsys, model, tok):
    path, _ = checkpoints
    status = translate.main(
        ["--checkpoint", str(path), "--beam", "2", "--max-len", "5", "--device", "cpu",
         *SENTENCES[:2]]
    )
    assert status == 0
    lines = capsys.readouterr().out.splitlines()
    expected = translate.translate_sentences(model, tok, SENTENCES[:2], beam_size=2, max_len=5)
    assert lines == expected


def test_module_runs_end_to_end(checkpoints):
    path, _ = checkpoints
    result = subprocess.run(
        [sys.executable, "-m", "transformer_ref.translate", "--checkpoint", str(path),
         "--max-len", "4", "--device", "auto", SENTENCES[0]],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1


def run_failing(argv, capsys) -> str:
    assert translate.main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    return captured.err


def test_missing_checkpoint(tmp_path, capsys):
    message = run_failing(["--checkpoint", str(tmp_path / "none.pt"), "Hallo"], capsys)
    assert "no checkpoint at" in message and "--task multi30k" in message


def test_checkpoint_without_tokenizer(checkpoints, capsys):
    _, reverse = checkpoints
    message = run_failing(["--checkpoint", str(reverse), "Hallo"], capsys)
    assert "'reverse' without a tokenizer" in message


def test_file_that_is_not_a_checkpoint(tmp_path, capsys):
    bogus = tmp_path / "notes.pt"
    bogus.write_text("not a checkpoint")
    message = run_failing(["--checkpoint", str(bogus), "Hallo"], capsys)
    assert "not a readable checkpoint" in message


def test_bad_device(checkpoints, capsys):
    path, _ = checkpoints
    message = run_failing(["--checkpoint", str(path), "--device", "gpu7", "Hallo"], capsys)
    assert "unknown device 'gpu7'" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_requested_without_gpu(checkpoints, capsys):
    path, _ = checkpoints
    message = run_failing(["--checkpoint", str(path), "--device", "cuda", "Hallo"], capsys)
    assert "no CUDA GPU" in message


def test_beam_must_be_positive(checkpoints, capsys):
    path, _ = checkpoints
    with pytest.raises(SystemExit) as info:
        translate.main(["--checkpoint", str(path), "--beam", "0", "Hallo"])
    assert info.value.code == 2
    assert "must be a positive integer" in capsys.readouterr().err


def test_input_file_and_standard_input_give_one_line_per_line(checkpoints, tmp_path, model, tok):
    path, _ = checkpoints
    lines = [SENTENCES[0], "", SENTENCES[1]]
    source = tmp_path / "sentences.de"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = translate.translate_sentences(model, tok, lines, beam_size=2, max_len=5)
    assert expected[1] == "" and expected[0] and expected[2]
    command = [sys.executable, "-m", "transformer_ref.translate", "--checkpoint", str(path),
               "--beam", "2", "--max-len", "5", "--device", "cpu"]
    from_file = subprocess.run([*command, "--input", str(source)], capture_output=True,
                               text=True, timeout=120)
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout.split("\n")[:-1] == expected
    piped = subprocess.run(command, input=source.read_text(encoding="utf-8"),
                           capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == from_file.stdout


def test_sentences_and_input_file_together_are_refused(checkpoints, tmp_path, capsys):
    path, _ = checkpoints
    message = run_failing(["--checkpoint", str(path), "--input", str(tmp_path / "x.de"),
                           "Hallo"], capsys)
    assert "not both" in message


def test_missing_input_file(checkpoints, tmp_path, capsys):
    path, _ = checkpoints
    message = run_failing(["--checkpoint", str(path), "--input", str(tmp_path / "x.de")], capsys)
    assert "x.de: no such file" in message


@pytest.mark.parametrize("beam_size", [1, 3])
def test_batches_give_what_one_sentence_at_a_time_gives(model, tok, beam_size):
    """Padding and masks make each output independent of the other sentences of its batch."""
    sentences = SENTENCES * 3 + ["Ein Mann."]
    exact = copy.deepcopy(model).double()  # float64: no rounding can flip a near tie
    together = translate.translate_sentences(exact, tok, sentences, beam_size=beam_size,
                                             max_len=8, batch_size=4)
    alone = [translate.translate_sentences(exact, tok, [s], beam_size=beam_size, max_len=8)[0]
             for s in sentences]
    assert together == alone
