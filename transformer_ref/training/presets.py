"""Model and training settings per task and hardware preset.

A preset fixes the number of optimizer steps, not a time budget, so two machines that run the
same preset train the same model; a slower machine only takes longer. (``--max-minutes`` adds
an optional time cap that stops a run early and says so.)

* ``cpu``: sized for a laptop-class CPU with two cores. The synthetic tasks stop as soon as
  held-out exact match reaches 100%; Multi30k trains for the steps that about 12 minutes reach
  on two quiet cores.
* ``cpu-long`` (Multi30k only): the translator chapter 10 ships, about 45 minutes on two
  cores.
* ``gpu``: one modern data-centre GPU: about 3 minutes of Multi30k training on an H200.

Multi30k runs report sacreBLEU on the validation set and on test_2016_flickr at the end.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, fields, replace
from typing import Any

from transformer_ref.model.build import POSITIONS
from transformer_ref.training.loop import TrainConfig

TASKS = ("copy", "reverse", "sort", "multi30k")
PRESETS = ("cpu", "cpu-long", "gpu")


@dataclass(frozen=True)
class Preset:
    """Everything a training run needs besides the data.

    Attributes:
        task, name: what this preset is for.
        model: keyword arguments for ``build_model`` (``make_model``'s, and ``positions``)
            other than the vocabulary sizes.
        train: optimisation settings.
        num_train, num_eval: synthetic tasks: training pairs and held-out pairs generated.
        num_symbols, min_len, max_len: synthetic tasks: alphabet and sequence lengths.
        bpe_vocab_size: Multi30k: joint BPE vocabulary size.
        max_train_len: Multi30k: training pairs longer than this (in tokens) are left out.
        eval_sentences: Multi30k: validation sentences greedily decoded at each evaluation.
        beam_size, length_penalty: Multi30k: final decoding of the validation and test sets.
        target_exact_match: synthetic tasks: stop once held-out exact match reaches this.
        cpu_threads: torch intra-op threads on the CPU (None: torch's default). Tiny models
            run faster on one thread, and much faster when other programs share the cores.
    """

    task: str
    name: str
    model: dict[str, Any]
    train: TrainConfig
    num_train: int = 0
    num_eval: int = 0
    num_symbols: int = 10
    min_len: int = 1
    max_len: int = 10
    bpe_vocab_size: int = 8000
    max_train_len: int = 100
    eval_sentences: int = 0
    beam_size: int = 4
    length_penalty: float = 0.6
    target_exact_match: float = 1.0
    cpu_threads: int | None = None


def _synthetic(task: str, name: str) -> Preset:
    if name == "cpu":
        model = dict(N=2, d_model=64, d_ff=256, h=4, dropout=0.0, norm_first=True)
        # Exact-match targets reward the sharpest distribution, so no label smoothing here;
        # mixed-length batches keep the updates steady. Held-out exact match reaches 100% after
        # about 700 steps (~40 s on two idle cores); 3,000 steps are only a cap.
        train = TrainConfig(max_steps=3000, max_tokens=1500, warmup=100, lr_factor=0.3,
                            smoothing=0.0, clip_norm=1.0, eval_every=50, sort_by_length=False)
        return Preset(task=task, name=name, model=model, train=train, num_train=20000,
                      num_eval=300, cpu_threads=1)
    # On a GPU a wider model and larger batches cost little extra time per step.
    model = dict(N=2, d_model=128, d_ff=512, h=4, dropout=0.0, norm_first=True)
    train = TrainConfig(max_steps=3000, max_tokens=6000, warmup=100, lr_factor=0.3,
                        smoothing=0.0, clip_norm=1.0, eval_every=50, sort_by_length=False)
    return Preset(task=task, name=name, model=model, train=train, num_train=20000, num_eval=300)


def _multi30k(name: str) -> Preset:
    if name == "cpu":
        # 3.7M parameters. On a CPU the output layer and its softmax over the vocabulary cost
        # much of a step, so a 4,000-token BPE makes a step about a third cheaper than 8,000
        # tokens, and batches of 1,500 tokens give twice the updates for the tokens seen. With
        # the learning rate falling linearly to zero at the last step, the 2,150 steps of about
        # 12 minutes reach test2016 BLEU 37.6, where 540 steps of 3,000 tokens (8k BPE, the
        # paper's decay) reached 25.8 (tuning runs in benchmarks/README.md).
        model = dict(N=2, d_model=256, d_ff=512, h=4, dropout=0.1, norm_first=True,
                     share_embeddings=True, tie_weights=True)
        train = TrainConfig(max_steps=2150, max_tokens=1500, warmup=300, lr_factor=0.5,
                            decay="linear", smoothing=0.1, clip_norm=1.0, eval_every=250)
        return Preset(task="multi30k", name=name, model=model, train=train,
                      bpe_vocab_size=4000, eval_sentences=200, beam_size=4)
    if name == "cpu-long":
        # The translator chapter 10 ships: the cpu preset's recipe (4k BPE, batches of 1,500
        # tokens, linear decay) with one more layer, a wider feed-forward network and more
        # dropout (6.6M parameters, 13 MB in float16), for twice the steps: test2016 BLEU 37.9
        # after about 45 minutes of training on two cores.
        model = dict(N=3, d_model=256, d_ff=1024, h=4, dropout=0.2, norm_first=True,
                     share_embeddings=True, tie_weights=True)
        train = TrainConfig(max_steps=4500, max_tokens=1500, warmup=400, lr_factor=0.5,
                            decay="linear", smoothing=0.1, clip_norm=1.0, eval_every=1000,
                            save_every=250)
        return Preset(task="multi30k", name=name, model=model, train=train,
                      bpe_vocab_size=4000, eval_sentences=500, beam_size=4)
    # Base-sized Transformer, pre-LN for a fast, stable start, strong dropout because
    # Multi30k is small (29k pairs). 2,200 steps of 12,000 tokens (about 16 epochs) at the
    # peak rate of a 2,000-step Noam warm-up, falling linearly to zero: test2016 BLEU 37.7
    # after 177 s of training on one H200 (benchmarks/README.md, "GPU figures").
    model = dict(N=6, d_model=512, d_ff=2048, h=8, dropout=0.3, norm_first=True,
                 share_embeddings=True, tie_weights=True)
    train = TrainConfig(max_steps=2200, max_tokens=12000, warmup=275, lr_factor=0.556,
                        decay="linear", smoothing=0.1, clip_norm=1.0, eval_every=1100)
    return Preset(task="multi30k", name=name, model=model, train=train,
                  bpe_vocab_size=10000, eval_sentences=1014, beam_size=5)


def get_preset(task: str, name: str = "cpu", **train_overrides: Any) -> Preset:
    """The settings for ``task`` on hardware ``name``; keyword arguments override TrainConfig.

    Example: ``get_preset("reverse", "cpu", max_steps=100)``.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {PRESETS}")
    if name == "cpu-long" and task != "multi30k":
        raise ValueError(
            f"the cpu-long preset is for --task multi30k; use --preset cpu for {task!r}"
        )
    preset = _multi30k(name) if task == "multi30k" else _synthetic(task, name)
    overrides = {k: v for k, v in train_overrides.items() if v is not None}
    if overrides:
        preset = replace(preset, train=replace(preset.train, **overrides))
    return preset


MODEL_SETTINGS = ("N", "d_model", "d_ff", "h", "dropout", "norm_first", "share_embeddings",
                  "tie_weights", "max_len", "positions")
PRESET_SETTINGS = ("bpe_vocab_size", "max_train_len", "eval_sentences", "beam_size",
                   "length_penalty", "cpu_threads")


def parse_setting(text: str) -> tuple[str, Any]:
    """``"NAME=VALUE"`` -> ``(NAME, value)``; the value is a Python literal or else a string.

    Example: ``parse_setting("dropout=0.2") == ("dropout", 0.2)``.
    """
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"expected NAME=VALUE, got {text!r} (for example dropout=0.2)")
    try:
        value = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        value = raw.strip()
    return name.strip(), value


def with_settings(preset: Preset, settings: dict[str, Any]) -> Preset:
    """A copy of ``preset`` with some settings changed, for tuning runs.

    A name may be a :class:`~transformer_ref.training.loop.TrainConfig` field (``warmup``,
    ``lr_factor``, ``max_tokens``, ...), a model argument (:data:`MODEL_SETTINGS`; e.g.
    ``positions="learned"`` for a learned position table) or a preset field
    (:data:`PRESET_SETTINGS`).
    """
    train_names = tuple(f.name for f in fields(TrainConfig))
    model, train, other = dict(preset.model), {}, {}
    for name, value in settings.items():
        # A model setting is compared with the model's value only: the preset's max_len is
        # the synthetic tasks' sequence length, not the model's positional range.
        current = (model.get(name) if name in MODEL_SETTINGS
                   else getattr(preset.train, name, getattr(preset, name, None)))
        if isinstance(current, (int, float)) and not isinstance(value, type(current)) and not (
            isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool)
        ):
            raise ValueError(
                f"setting {name} must be of type {type(current).__name__}, like its preset value "
                f"{current!r}, got {value!r}"
            )
        if name == "positions" and value not in POSITIONS:
            raise ValueError(f"setting positions must be one of {POSITIONS}, got {value!r}")
        if name == "max_len" and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 2):
            raise ValueError(f"setting max_len must be a whole number of positions >= 2, got "
                             f"{value!r}")
        if name in MODEL_SETTINGS:
            model[name] = value
        elif name in train_names:
            train[name] = value
        elif name in PRESET_SETTINGS:
            other[name] = value
        else:
            known = ", ".join(MODEL_SETTINGS + train_names + PRESET_SETTINGS)
            raise ValueError(f"unknown setting {name!r}; choose one of: {known}")
    return replace(preset, model=model, train=replace(preset.train, **train), **other)
