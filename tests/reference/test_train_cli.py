"""The training command line: a full reverse-task run and its error messages."""

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from transformer_ref.data.batching import pad_sequences
from transformer_ref.data.datasets import synthetic_pairs
from transformer_ref.decoding import greedy_decode
from transformer_ref.masks import make_src_mask
from transformer_ref.train import main
from transformer_ref.training.checkpoint import load_model

ROOT = Path(__file__).resolve().parents[2]


def train_cli(*args: str, env: dict | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "transformer_ref.train", *args, "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def refused(*args: str) -> SimpleNamespace:
    """``python -m transformer_ref.train ARGS`` refused before it trains, run in this process
    (a new interpreter would spend seconds importing PyTorch for each message): its exit
    status and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([*args, "--no-progress"])
        except SystemExit as exit_:  # argparse's own refusals
            status = exit_.code
    return SimpleNamespace(returncode=status, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture(scope="module")
def reverse_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "reverse"
    proc = train_cli("--task", "reverse", "--preset", "cpu", "--device", "cpu", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc


@pytest.mark.slow
def test_reverse_cpu_reaches_full_exact_match(reverse_run):
    out, proc = reverse_run
    report = json.loads((out / "metrics.json").read_text())
    assert report["metrics"]["exact_match"] == 1.0, proc.stdout
    assert report["metrics"]["held_out_sequences"] >= 100
    assert report["wall_seconds"] > 0 and report["steps"] > 0 and report["device"] == "cpu"
    assert "held-out exact match: 100.0%" in proc.stdout

    model, ckpt = load_model(out / "checkpoint.pt")
    assert ckpt["task"] == "reverse" and ckpt["step"] == report["steps"]
    # The saved model reverses sequences it has never been scored on before.
    pairs = synthetic_pairs("reverse", 20, seed=12345)
    src = pad_sequences([s for s, _ in pairs])
    hyps = greedy_decode(model, src, make_src_mask(src), max_len=12)
    assert sum(h == t[:-1] for h, (_, t) in zip(hyps, pairs, strict=True)) >= 18


@pytest.mark.slow
def test_out_dir_of_another_task_is_refused(reverse_run):
    out, _ = reverse_run
    proc = refused("--task", "copy", "--device", "cpu", "--out", str(out))
    assert proc.returncode == 2
    assert "'reverse'" in proc.stderr and "choose another --out" in proc.stderr


def test_bad_device_is_a_clear_error(tmp_path):
    proc = refused("--task", "reverse", "--device", "tpu", "--out", str(tmp_path))
    assert proc.returncode == 2 and "expected 'auto', 'cpu', 'cuda'" in proc.stderr
    if not torch.cuda.is_available():
        proc = refused("--task", "reverse", "--device", "cuda", "--out", str(tmp_path))
        assert proc.returncode == 2
        assert "no CUDA GPU is visible; use --device cpu or auto" in proc.stderr


def test_missing_multi30k_points_at_the_download(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("MULTI30K_DIR", str(empty))
    proc = refused("--task", "multi30k", "--device", "cpu", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2, proc.stderr
    assert "python -m transformer_ref.data download multi30k" in proc.stderr
    assert "MULTI30K_DIR" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    proc = refused("--task", "reverse", "--device", "cpu", "--out", str(tmp_path), "--resume")
    assert proc.returncode == 2 and "drop --resume" in proc.stderr


def test_eval_every_sets_the_evaluation_interval(tmp_path):
    proc = train_cli("--task", "reverse", "--preset", "cpu", "--device", "cpu", "--out",
                     str(tmp_path), "--max-steps", "20", "--eval-every", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    history = json.loads((tmp_path / "metrics.json").read_text())["history"]
    assert [entry["step"] for entry in history] == [5, 10, 15, 20]
    seconds = [entry["train_seconds"] for entry in history]
    assert seconds == sorted(seconds) and seconds[0] > 0
    assert all(0 <= entry["exact_match"] <= 1 for entry in history)


def test_eval_every_must_not_be_negative(tmp_path):
    proc = refused("--task", "reverse", "--device", "cpu", "--out", str(tmp_path),
                     "--eval-every", "-5")
    assert proc.returncode == 2 and "expected 0 or more, got -5" in proc.stderr


def test_set_changes_one_setting_and_the_run_records_it(tmp_path):
    proc = train_cli("--task", "reverse", "--preset", "cpu", "--device", "cpu", "--out",
                     str(tmp_path), "--max-steps", "3", "--eval-every", "0",
                     "--set", "dropout=0.25", "--set", "decay=linear", "--set", "warmup=2",
                     "--set", "positions=learned", "--set", "max_len=32")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["settings"] == {"dropout": 0.25, "decay": "linear", "warmup": 2,
                                  "positions": "learned", "max_len": 32}
    assert report["model_config"]["dropout"] == 0.25
    assert report["model_config"]["positions"] == "learned"
    assert report["train_config"]["decay"] == "linear" and report["steps"] == 3
    assert report["stop_reason"] is None
    model, ckpt = load_model(tmp_path / "checkpoint.pt")
    assert ckpt["model_config"]["dropout"] == 0.25
    # The learned table comes back from the checkpoint, trained, with the range asked for.
    assert model.pos_encoding.pe.weight.shape == (32, report["model_config"]["d_model"])


@pytest.mark.parametrize(("setting", "message"), [
    ("bogus=1", "unknown setting 'bogus'; choose one of: N, d_model"),
    ("warmup=many", "setting warmup must be of type int, like its preset value 100, got 'many'"),
    ("dropout", "expected NAME=VALUE, got 'dropout'"),
])
def test_bad_settings_are_named(tmp_path, setting, message):
    proc = refused("--task", "reverse", "--device", "cpu", "--out", str(tmp_path),
                     "--set", setting)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_cpu_long_preset_is_for_multi30k_only(tmp_path):
    proc = refused("--task", "reverse", "--preset", "cpu-long", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "the cpu-long preset is for --task multi30k" in proc.stderr


def test_every_preset_fixes_its_steps_and_has_no_time_cap():
    from transformer_ref.training.presets import PRESETS, TASKS, get_preset

    for task in TASKS:
        for name in PRESETS:
            if name == "cpu-long" and task != "multi30k":
                continue
            preset = get_preset(task, name)
            assert preset.train.max_minutes is None and preset.train.max_steps > 0, (task, name)
