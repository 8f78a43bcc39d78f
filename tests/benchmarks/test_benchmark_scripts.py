"""The scripts that draw the README's figures, run end to end with tiny settings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.image import imread

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path: Path, min_width: int, min_height: int) -> None:
    """``path`` is a PNG of at least the given size in pixels, and not a blank canvas."""
    assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    image = imread(path)  # (height, width, channels)
    assert image.shape[0] >= min_height and image.shape[1] >= min_width, image.shape
    assert image.std() > 0.05, f"{path} is (almost) one colour"


@pytest.fixture
def keep_threads() -> Iterator[None]:
    """``--threads`` changes PyTorch's thread count for the whole process; put it back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_attention_scaling_measures_both_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], keep_threads: None, benchmark_script
) -> None:
    scaling = benchmark_script("attention_scaling")
    plot, table = tmp_path / "scaling.png", tmp_path / "scaling.json"
    # One thread: the CPU fused kernel's scratch buffers grow with the thread count.
    results = scaling.main([
        "--device", "cpu", "--lengths", "64,256", "--repeats", "1", "--threads", "1",
        "--plot", str(plot), "--json", str(table),
    ])

    rows = results["rows"]
    assert [row["n"] for row in rows] == [64, 256]
    for row in rows:
        for key in ("math_ms", "fused_ms", "math_mib", "fused_mib"):
            assert row[key] > 0, (key, row)
    largest = rows[-1]
    # The math path keeps the (1, 8, n, n) float32 weights for the backward pass, so its peak
    # is at least one such matrix; the fused path never builds one and needs less.
    weights_mib = 8 * 256**2 * 4 / 2**20
    assert largest["math_mib"] >= weights_mib
    assert largest["fused_mib"] < largest["math_mib"]
    # Quadrupling n multiplies the n x n matrices by 16; the fused path grows much less.
    assert rows[1]["math_mib"] / rows[0]["math_mib"] > 8
    assert rows[1]["fused_mib"] / rows[0]["fused_mib"] < 8

    printed = capsys.readouterr().out
    assert "math/fused" in printed
    for row in rows:
        assert any(line.split()[:1] == [str(row["n"])] for line in printed.splitlines())
    assert json.loads(table.read_text()) == results
    assert_png(plot, min_width=800, min_height=400)


def test_attention_scaling_rejects_decreasing_lengths(tmp_path: Path, benchmark_script) -> None:
    scaling = benchmark_script("attention_scaling")
    with pytest.raises(SystemExit):
        scaling.main(["--device", "cpu", "--lengths", "128,64", "--plot", str(tmp_path / "x.png")])
    assert not (tmp_path / "x.png").exists()


def test_readme_figures_draws_encoding_and_translator_attention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], benchmark_script, project_root: Path
) -> None:
    figures = benchmark_script("readme_figures")
    result = figures.main(["--out", str(tmp_path)])

    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "positional_encoding.png", "translator_attention.png",
    ]
    assert sorted(result["figures"]) == sorted(tmp_path.iterdir())
    assert_png(tmp_path / "positional_encoding.png", min_width=600, min_height=300)
    assert_png(tmp_path / "translator_attention.png", min_width=1000, min_height=300)

    # The shipped checkpoint's translation is the one the README's caption of the figure quotes.
    readme = " ".join((project_root / "README.md").read_text(encoding="utf-8").split())
    assert f'"Ein Hund rennt über die Wiese." → "{result["translation"]}"' in readme
    assert result["translation"] in capsys.readouterr().out
    weights = result["cross_attention"]
    # 4 heads; 7 output tokens + EOS attend over 7 source tokens + EOS.
    assert weights.shape == (4, 8, 8)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)


def test_translation_speed_compares_batched_with_one_at_a_time(
    multi30k_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, benchmark_script,
    keep_threads: None,
) -> None:
    monkeypatch.setenv("MULTI30K_DIR", str(multi30k_dir))
    speed = benchmark_script("translation_speed")
    saved = tmp_path / "speed.json"
    assert speed.main(["--sentences", "6", "--beam", "2", "--batch-size", "4", "--threads", "1",
                       "--json", str(saved)]) == 0
    result = json.loads(saved.read_text())
    assert (result["sentences"], result["beam"], result["threads"]) == (6, 2, 1)
    runs = result["runs"]
    assert set(runs) == {speed.BATCHED, "one at a time, cached", "one at a time, plain decoder",
                         "batched, plain decoder"}
    for run in runs.values():
        assert run["seconds"] > 0
        assert run["speedup_of_batched"] == pytest.approx(
            run["seconds"] / runs[speed.BATCHED]["seconds"])
        # Batching and the cache change the speed, never the translations.
        assert run["identical"] == 6


def test_ship_language_model_trains_saves_and_measures_the_saved_file(
    multi30k_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, benchmark_script,
    keep_threads: None, capsys: pytest.CaptureFixture[str],
) -> None:
    from transformer_ref.training.lm_training import load_language_model

    monkeypatch.setenv("MULTI30K_DIR", str(multi30k_dir))
    ship = benchmark_script("ship_language_model")
    out = tmp_path / "lm.pt"
    assert ship.main(["--steps", "3", "--out", str(out)]) == 0
    model, tok, record = load_language_model(out)
    metrics = record["metrics"]
    assert record["step"] == 3 and [r["step"] for r in record["extra"]["reports"]] == [3]
    assert metrics["val_loss"] > 0 and metrics["test2016_perplexity"] > 1
    assert len(metrics["samples"]) == len(ship.PROMPTS) and tok.get_vocab_size() == 2000
    assert model.config == {"vocab": 2000, **ship.RECIPE["model"]}
    assert "validation loss" in capsys.readouterr().out


def test_gpu_figures_runs_its_steps_in_processes_and_gathers_their_figures(
    tmp_path: Path, benchmark_script
) -> None:
    gpu = benchmark_script("gpu_figures")
    code = gpu.main(["--quick", "--device", "cpu", "--only", "environment,amp",
                     "--out", str(tmp_path)])

    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary) == {"started", "command", "environment", "amp"}
    assert summary["environment"]["status"] == "ok"
    assert summary["environment"]["figures"]["torch"] == torch.__version__
    amp = summary["amp"]["figures"]
    # On the CPU both runs take the float32 path; the point here is the script's plumbing.
    assert set(amp) == {"bfloat16", "float16"}
    for run in amp.values():
        assert run["exit"] == 0 and run["steps"] == 10, run
        assert 0.0 <= run["exact_match"] <= 1.0
    assert "task reverse" in (tmp_path / "amp.log").read_text()


def test_gpu_figures_gives_the_training_what_the_other_steps_leave(
    tmp_path: Path, benchmark_script
) -> None:
    gpu = benchmark_script("gpu_figures")
    args = gpu.argparse.Namespace(budget=600.0, train_minutes=5.0, quick=False, device="cuda",
                                  out=tmp_path)
    command, limit = gpu.training_step(args, elapsed=210.0)
    assert limit == 390.0
    assert args.train_minutes == (600.0 - 210.0 - gpu.TRAINING_RESERVE) / 60
    assert command[command.index("--train-minutes") + 1] == str(args.train_minutes)
    # Without a budget the cap is --train-minutes, with the reserve for data and decoding.
    args = gpu.argparse.Namespace(budget=None, train_minutes=2.0, quick=False, device="cuda",
                                  out=tmp_path)
    assert gpu.training_step(args, elapsed=999.0)[1] == 120.0 + gpu.TRAINING_RESERVE
