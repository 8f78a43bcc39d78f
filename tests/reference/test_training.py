"""Training loop pieces: learning, checkpoints, exact resume and the device helpers."""

import pytest
import torch

from transformer_ref.data.datasets import synthetic_pairs
from transformer_ref.modules import make_model
from transformer_ref.training.checkpoint import load_checkpoint, load_model, save_checkpoint
from transformer_ref.training.device import autocast_dtype, make_grad_scaler, resolve_device
from transformer_ref.training.loop import Checkpointing, TrainConfig, fit, seed_everything

PAIRS = synthetic_pairs("copy", 300, max_len=6, seed=0)
VOCAB = 14


def tiny_model(seed: int = 0):
    seed_everything(seed)
    # Dropout on, so an exact resume also needs the random state restored.
    return make_model(VOCAB, VOCAB, N=1, d_model=16, d_ff=32, h=2, dropout=0.1)


def config(steps: int) -> TrainConfig:
    return TrainConfig(max_steps=steps, max_tokens=120, warmup=10, seed=3)


def run(steps, path=None, resume=False, model=None):
    model = model or tiny_model()
    checkpoint = Checkpointing(path, resume=resume, task="copy") if path else None
    fit(model, PAIRS, config(steps), device=torch.device("cpu"), checkpoint=checkpoint,
        progress=False, log=lambda _m: None)
    return model


def test_resume_equals_straight_training(tmp_path):
    # More steps than one epoch's batches, so the data position must survive the resume too.
    k = 12
    straight = run(2 * k)
    path = tmp_path / "ckpt.pt"
    run(k, path)
    resumed = run(2 * k, path, resume=True, model=tiny_model(seed=99))
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values(),
                            strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    assert load_checkpoint(path)["step"] == 2 * k


def test_loss_goes_down_and_evaluation_can_stop_training():
    model = tiny_model()
    calls = []

    def evaluate(m):
        calls.append(m.training)
        return {"calls": float(len(calls))}

    cfg = TrainConfig(max_steps=60, max_tokens=120, warmup=10, eval_every=10, smoothing=0.0)
    result = fit(model, PAIRS, cfg, device=torch.device("cpu"), evaluate=evaluate,
                 stop_when=lambda m: m["calls"] >= 3, progress=False, log=lambda _m: None)
    assert result.step == 30 and result.stopped_early
    assert calls == [False, False, False]  # evaluation sees the model in eval mode
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    assert result.tokens > 0 and result.tokens_per_second > 0


def test_checkpoint_roundtrip_and_missing_file(tmp_path):
    model = tiny_model()
    path = save_checkpoint(tmp_path / "a" / "c.pt", model, step=5, task="copy",
                           metrics={"exact_match": 0.5})
    loaded, ckpt = load_model(path)
    assert ckpt["task"] == "copy" and ckpt["metrics"] == {"exact_match": 0.5}
    assert not loaded.training
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_device_helpers():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type in ("cpu", "cuda")
    assert autocast_dtype(torch.device("cpu")) is None
    assert not make_grad_scaler(torch.device("cpu"), None).is_enabled()
    with pytest.raises(ValueError, match="expected 'auto'"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU is visible; use --device cpu or auto"):
            resolve_device("cuda")


def test_history_records_training_seconds_across_a_resume(tmp_path):
    cfg = TrainConfig(max_steps=30, max_tokens=120, warmup=10, eval_every=10, seed=3)
    path = tmp_path / "ckpt.pt"
    first = fit(tiny_model(), PAIRS, cfg, device=torch.device("cpu"), evaluate=lambda m: {},
                checkpoint=Checkpointing(path), progress=False, log=lambda _m: None)
    assert [entry["step"] for entry in first.history] == [10, 20, 30]
    seconds = [entry["train_seconds"] for entry in first.history]
    assert 0 < seconds[0] < seconds[1] < seconds[2] == first.train_seconds

    more = TrainConfig(max_steps=50, max_tokens=120, warmup=10, eval_every=10, seed=3)
    resumed = fit(tiny_model(), PAIRS, more, device=torch.device("cpu"), evaluate=lambda m: {},
                  checkpoint=Checkpointing(path, resume=True), progress=False,
                  log=lambda _m: None)
    # The history and the clock go on from the saved run, as the step count does.
    assert [entry["step"] for entry in resumed.history] == [10, 20, 30, 40, 50]
    assert resumed.history[:3] == first.history
    assert first.train_seconds < resumed.history[3]["train_seconds"]
    assert resumed.history[-1]["train_seconds"] == resumed.train_seconds


def test_progress_reports_and_lines_without_a_terminal(capsys):
    """Outside a terminal (a notebook, a log file) a run still says how far it is."""
    reports, lines = [], []
    cfg = TrainConfig(max_steps=20, max_tokens=120, warmup=10, report_every=5)
    fit(tiny_model(), PAIRS, cfg, device=torch.device("cpu"), log=lines.append,
        on_report=reports.append)
    assert [r["step"] for r in reports] == [5, 10, 15, 20]
    assert all(r["max_steps"] == 20 and r["train_loss"] > 0 and r["lr"] > 0 for r in reports)
    assert [r["train_seconds"] for r in reports] == sorted(r["train_seconds"] for r in reports)
    progress = [line for line in lines if line.startswith("step ")]
    assert len(progress) == 4 and progress[-1].startswith("step 20/20: train loss ")
    # The first report's steps include the start-up, so they give no estimate; from the
    # second report on, the recent steps do.
    assert progress[0].endswith("estimating the time left")
    assert all(line.endswith(" s to go") for line in progress[1:3])
    # The default: about twenty reports per run; progress=False keeps the lines quiet.
    lines.clear()
    fit(tiny_model(), PAIRS, TrainConfig(max_steps=40, max_tokens=120, warmup=10),
        device=torch.device("cpu"), log=lines.append, progress=False, on_report=reports.append)
    assert lines == [] and len(reports) == 4 + 20


def test_time_cap_stops_early_and_says_why():
    lines = []
    cfg = TrainConfig(max_steps=10_000, max_tokens=120, warmup=10, max_minutes=0.02)
    result = fit(tiny_model(), PAIRS, cfg, device=torch.device("cpu"), progress=False,
                 log=lines.append)
    assert result.stopped_early and 0 < result.step < 10_000
    assert result.stop_reason.startswith("the 0.02-minute time cap was spent after")
    assert "of 10000 steps" in result.stop_reason
    assert any(line == f"stopping at step {result.step}: {result.stop_reason}" for line in lines)


def test_a_run_that_takes_all_its_steps_has_no_stop_reason():
    result = fit(tiny_model(), PAIRS, config(5), device=torch.device("cpu"), progress=False,
                 log=lambda _m: None)
    assert result.step == 5 and not result.stopped_early and result.stop_reason is None


def test_linear_decay_reaches_zero_at_the_last_step():
    model = tiny_model()
    rates = []
    cfg = TrainConfig(max_steps=30, max_tokens=120, warmup=10, decay="linear", report_every=1)
    fit(model, PAIRS, cfg, device=torch.device("cpu"), progress=False, log=lambda _m: None,
        on_report=lambda r: rates.append(r["lr"]))
    assert rates[-1] == 0.0 and max(rates) == pytest.approx(rates[9])
    assert rates[10:] == sorted(rates[10:], reverse=True)
    with pytest.raises(ValueError, match="decay must be 'inverse_sqrt' or 'linear'"):
        TrainConfig(max_steps=3, max_tokens=10, decay="cosine")
