"""The time-to-accuracy and notebook-time benchmarks, run end to end with tiny settings."""

from __future__ import annotations

import json
import multiprocessing
import re
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.learner.selfcheck import ExerciseOutcome, SelfCheckReport
from transformer_ref.training.presets import get_preset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tta(benchmark_script):
    return benchmark_script("time_to_accuracy")


@pytest.fixture(scope="module")
def notebook_times(benchmark_script):
    return benchmark_script("notebook_times")


@pytest.fixture(scope="module")
def stability(benchmark_script):
    return benchmark_script("grading_stability")


# ------------------------------------------------------------------ time to accuracy


def test_reverse_run_prints_its_curve_and_result(tta, capsys, tmp_path):
    saved = tmp_path / "curves.json"
    status = tta.main(["--tasks", "reverse", "--presets", "cpu", "--device", "cpu",
                       "--eval-every", "10", "--json", str(saved), "--", "--max-steps", "20"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "reverse cpu on cpu: quality against training time" in out
    rows = re.findall(r"^\s+(\d+\.\d)\s+(\d+)\s+(\d+\.\d)%$", out, re.M)
    assert [int(step) for _, step, _ in rows] == [10, 20], out
    assert 0 < float(rows[0][0]) <= float(rows[1][0])
    assert re.search(r"^reverse cpu on cpu: did NOT reach 100% held-out exact match \(final "
                     r"\d+\.\d% of \d+ sequences\); \d+\.\d s wall including start-up "
                     r"\(20 steps, \d+\.\d s of training\)$", out, re.M), out

    (run,) = json.loads(saved.read_text())
    assert (run["task"], run["preset"], run["steps"]) == ("reverse", "cpu", 20)
    assert [p["step"] for p in run["curve"]] == [10, 20]
    assert run["curve"][-1]["train_seconds"] == pytest.approx(run["train_seconds"])
    assert run["process_seconds"] > run["train_seconds"] > 0


def test_gpu_preset_without_cuda_is_skipped_not_trained(tta, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert tta.main(["--tasks", "reverse", "sort", "--presets", "gpu"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{task} gpu: the gpu preset needs a CUDA GPU and none is visible; skipped"
        for task in ("reverse", "sort")
    ]


def test_gpu_preset_is_skipped_on_an_explicit_cpu_device(tta, capsys):
    assert tta.main(["--tasks", "copy", "--presets", "gpu", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "copy gpu: the gpu preset needs a CUDA GPU" in out and "skipped" in out


def test_result_is_the_first_time_exact_match_reached_100(tta):
    history = [{"step": 50, "train_seconds": 3.0, "train_loss": 1.0, "exact_match": 0.4},
               {"step": 100, "train_seconds": 6.5, "train_loss": 0.1, "exact_match": 1.0},
               {"step": 110, "train_seconds": 7.2, "train_loss": 0.1, "exact_match": 1.0}]
    report = {"task": "reverse", "preset": "cpu", "device": "cpu", "steps": 110,
              "train_seconds": 7.2, "process_seconds": 12.0, "history": history,
              "metrics": {"exact_match": 1.0, "held_out_sequences": 211}}
    points = tta.curve(report)
    assert points[1] == {"train_seconds": 6.5, "step": 100, "exact_match": 1.0}
    assert tta.describe(report, points) == (
        "reverse cpu on cpu: 100% held-out exact match after 6.5 s of training (step 100, 211 "
        "sequences); 12.0 s wall including start-up (110 steps, 7.2 s of training)")


def test_multi30k_curve_is_validation_bleu_and_result_is_test_bleu(tta):
    history = [{"step": 50, "train_seconds": 80.0, "train_loss": 6.0, "val_loss": 5.5,
                "val_bleu_greedy": 1.25},
               {"step": 100, "train_seconds": 160.0, "train_loss": 4.0, "val_loss": 4.1,
                "val_bleu_greedy": 9.5}]
    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    report = {"task": "multi30k", "preset": "cpu", "device": "cpu", "steps": 100,
              "train_seconds": 160.0, "process_seconds": 300.0, "history": history,
              "metrics": {"val_bleu": 13.456, "test_2016_flickr_bleu": 12.345, "beam_size": 4,
                          "bleu_signature": signature}}
    points = tta.curve(report)
    lines = tta.format_curve(report, points)
    sentences = get_preset("multi30k", "cpu").eval_sentences
    assert f"val BLEU (greedy, {sentences} sentences)" in lines[0]
    assert lines[1].split() == ["80.0", "50", "1.25", "5.500"]
    assert lines[2].split() == ["160.0", "100", "9.50", "4.100"]
    assert tta.describe(report, points) == (
        "multi30k cpu on cpu: validation sacreBLEU 13.46, test_2016_flickr sacreBLEU 12.35 "
        "(beam 4); 300.0 s wall including start-up (100 steps, 160.0 s of training); "
        f"{signature}")
    del report["metrics"]["test_2016_flickr_bleu"]  # a tuning run (--no-test)
    assert "test_2016_flickr not scored (beam 4)" in tta.describe(report, points)


# ------------------------------------------------------------------ notebook times


def test_status_names_the_first_error(notebook_times):
    report = SelfCheckReport(Path("ch.ipynb"), cell_errors=[(3, "ZeroDivisionError: by zero"),
                                                            (5, "NameError: name 'x'")])
    assert notebook_times.status_of(report) == "error: ZeroDivisionError"
    failing = SelfCheckReport(Path("ch.ipynb"), [ExerciseOutcome("ch02.softmax", 4, False, "")])
    assert notebook_times.status_of(failing) == "failed: ch02.softmax"
    passing = SelfCheckReport(Path("ch.ipynb"), [ExerciseOutcome("ch02.softmax", 4, True, "")])
    assert notebook_times.status_of(passing) == "ok"


def test_busy_processes_spin_only_inside_the_block(notebook_times):
    with notebook_times.busy_processes(2):
        spinning = multiprocessing.active_children()
        assert len(spinning) == 2 and all(process.is_alive() for process in spinning)
    assert not any(process.is_alive() for process in spinning)


def test_slowest_cell_leaves_out_the_imports(notebook_times):
    report = SelfCheckReport(Path("ch.ipynb"), cell_seconds={2: 4.0, 4: 0.1, 7: 0.3, 9: 0.2})
    assert notebook_times.slowest_cell(report) == (7, 0.3)
    assert notebook_times.slowest_cell(SelfCheckReport(Path("ch.ipynb"),
                                                       cell_seconds={2: 4.0})) is None


@pytest.mark.slow
def test_chapter_one_fast_mode_is_timed_and_the_repository_untouched(
    notebook_times, capsys, tmp_path
):
    chapter = ROOT / "solutions" / "ch01_positional_encoding"
    before = {p: p.stat().st_mtime_ns for p in chapter.rglob("*")}
    saved = tmp_path / "times.json"
    status = notebook_times.main(["--chapters", "ch01_positional_encoding", "--modes", "fast",
                                  "--json", str(saved)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert re.search(r"^chapter\s+fast s\s+full s\s+slowest cell, fast\s+slowest cell, full"
                     r"\s+status$", out, re.M), out
    assert re.search(r"^ch01_positional_encoding\s+\d+\.\d\s+-\s+cell \d+: \d+\.\d\d s\s+-"
                     r"\s+ok$", out, re.M), out
    times = json.loads(saved.read_text())
    assert list(times) == ["ch01_positional_encoding"]
    assert list(times["ch01_positional_encoding"]) == ["fast"]
    run = times["ch01_positional_encoding"]["fast"]
    assert run["seconds"] > run["imports_seconds"] > 0
    # The slowest cell after the imports is a code cell of the notebook, numbered from 1.
    nb = nbformat.read(chapter / "ch01_positional_encoding.ipynb", as_version=4)
    code = [i + 1 for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    number, seconds = run["slowest_cell"]
    assert number in code[1:] and 0 <= seconds < run["seconds"]
    assert {p: p.stat().st_mtime_ns for p in chapter.rglob("*")} == before


# ------------------------------------------------------------------ grading stability


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
def test_grading_stability_grades_the_class_again_and_compares(stability, capsys):
    """Two gradings of an honest learner and an empty file with one worker: no grading_error,
    grades as expected, the same CSV."""
    assert stability.main(["--runs", "2", "--jobs", "1", "--learners", "ada", "mo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("3 notebooks of 2 learners, 2 runs, --jobs 1\n"), out
    for run in (1, 2):
        assert re.search(rf"^run  {run}: +\d+\.\d s  grading_error: 0  as expected: yes  CSV "
                         r"identical to run 1: yes$", out, re.M), out
    assert out.rstrip().endswith("every run clean")
