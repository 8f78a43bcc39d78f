"""Training loop pieces: learning, checkpoints, exact resume and the device helpers."""

import pytest
import torch

from transformer_ref.checkpoint import load_checkpoint, load_model, save_checkpoint
from transformer_ref.data import synthetic_pairs
from transformer_ref.device import autocast_dtype, make_grad_scaler, resolve_device
from transformer_ref.modules import make_model
from transformer_ref.training import TrainConfig, fit, seed_everything

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
    fit(model, PAIRS, config(steps), device=torch.device("cpu"), checkpoint_path=path,
        resume=resume, task="copy", progress=False, log=lambda _m: None)
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
                checkpoint_path=path, progress=False, log=lambda _m: None)
    assert [entry["step"] for entry in first.history] == [10, 20, 30]
    seconds = [entry["train_seconds"] for entry in first.history]
    assert 0 < seconds[0] < seconds[1] < seconds[2] == first.train_seconds

    more = TrainConfig(max_steps=50, max_tokens=120, warmup=10, eval_every=10, seed=3)
    resumed = fit(tiny_model(), PAIRS, more, device=torch.device("cpu"), evaluate=lambda m: {},
                  checkpoint_path=path, resume=True, progress=False, log=lambda _m: None)
    # The history and the clock go on from the saved run, as the step count does.
    assert [entry["step"] for entry in resumed.history] == [10, 20, 30, 40, 50]
    assert resumed.history[:3] == first.history
    assert first.train_seconds < resumed.history[3]["train_seconds"]
    assert resumed.history[-1]["train_seconds"] == resumed.train_seconds
