"""The check library: registry, grading of good and bad functions, hidden inputs, messages."""

from __future__ import annotations

import copy
import re
import subprocess
import sys

import numpy as np
import pytest

import autograder
from autograder import check, exercises, grade_function
from autograder.exercises.checking import (
    DEVELOPMENT_SECRET,
    SECRET_ENV,
    CheckFailure,
    Hint,
    call,
    collect_notes,
    compare,
    expect_raises,
    random_mask,
    seed_for,
    shows,
)
from autograder.exercises.registry import CHAPTERS, DIFFICULTIES, get_exercise, register

# Section 4 of the course design: the exercise ids other code relies on.
CONTRACT_IDS = {
    "ch01.positional_encoding", "ch01.relative_position_matrix",
    "ch02.softmax", "ch02.causal_mask", "ch02.padding_mask",
    "ch02.scaled_dot_product_attention", "ch03.attention_head",
    "ch04.split_heads", "ch04.merge_heads", "ch04.multi_head_attention",
    "ch05.layer_norm", "ch05.feed_forward", "ch05.add_and_norm",
    "ch06.encoder_block", "ch06.encoder",
}


def test_registry_holds_exactly_the_contract_ids_for_the_numpy_chapters():
    numpy_ids = [i for i in exercises() if i.split(".")[0] <= "ch06"]
    assert set(numpy_ids) == CONTRACT_IDS
    assert len(numpy_ids) == len(CONTRACT_IDS)
    # The PyTorch chapters add their own ids; they follow the same "chNN.name" form.
    pytorch_ids = set(exercises()) - set(numpy_ids)
    assert all(re.fullmatch(r"ch(0[7-9]|1[0-2])\.[a-z0-9_]+", i) for i in pytorch_ids)


def test_exercises_are_listed_by_chapter():
    chapters = [exercise_id.split(".")[0] for exercise_id in exercises()]
    assert chapters == sorted(chapters)


@pytest.mark.parametrize("exercise_id", exercises())
def test_exercise_metadata(exercise_id):
    exercise = get_exercise(exercise_id)
    assert exercise.id == exercise_id
    assert exercise.chapter == CHAPTERS[exercise_id.split(".")[0]]
    assert exercise.points > 0 and exercise.minutes > 0
    assert exercise.difficulty in DIFFICULTIES
    assert exercise.title
    reference = exercise.load_reference()
    assert callable(reference)
    # Functions keep the id's name; classes (PyTorch chapters) are its CamelCase form.
    assert re.sub(r"(?<!^)(?=[A-Z])", "_", reference.__name__).lower() == exercise_id.split(".")[1]


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("exercise_id", exercises())
def test_reference_passes(exercise_id, hidden):
    result = grade_function(exercise_id, get_exercise(exercise_id).load_reference(), hidden)
    assert result.passed, result.message
    assert exercise_id in result.message


def _raises_runtime_error(*args, **kwargs):
    raise RuntimeError("boom in learner code")


def _stub(*args, **kwargs):
    raise NotImplementedError()


def _returns_none(*args, **kwargs):
    return None


def _returns_string(*args, **kwargs):
    return "an answer"


def _exits(*args, **kwargs):
    sys.exit(3)


@pytest.mark.parametrize("exercise_id", exercises())
@pytest.mark.parametrize(
    ("fn", "expected_words"),
    [
        (_raises_runtime_error, "RuntimeError: boom in learner code"),
        (_stub, "NotImplementedError"),
        (_returns_none, "None"),
        (_returns_string, "str"),
        (_exits, "SystemExit"),
        (42, "expected a function, got int 42"),
        (None, "expected a function, got None"),
    ],
    ids=["raises", "stub", "returns-None", "returns-str", "sys-exit", "int", "None"],
)
def test_bad_functions_fail_without_raising(exercise_id, fn, expected_words):
    for hidden in (False, True):
        result = grade_function(exercise_id, fn, hidden=hidden)
        assert result.passed is False
        assert expected_words in result.message
        assert exercise_id in result.message


def test_wrong_shape_names_both_shapes():
    result = grade_function("ch02.softmax", lambda x, axis=-1: np.swapaxes(x, -1, -2)[..., :-1])
    assert not result.passed
    assert "expected shape" in result.message and ", got (" in result.message


def test_nan_is_reported():
    result = grade_function("ch02.softmax", lambda x, axis=-1: np.full(x.shape, np.nan))
    assert not result.passed
    assert "NaN" in result.message


def test_odd_return_object_does_not_break_grading():
    class Weird(np.ndarray):
        def __eq__(self, other):
            raise RuntimeError("no comparisons")

    def fn(n):
        return np.tril(np.ones((n, n), dtype=bool)).view(Weird)

    result = grade_function("ch02.causal_mask", fn)
    assert isinstance(result.passed, bool)


def test_unknown_id_lists_the_valid_ids():
    with pytest.raises(KeyError) as info:
        grade_function("ch02.softmx", lambda x: x)
    assert isinstance(info.value, ValueError)
    assert "ch02.softmx" in str(info.value) and "ch02.softmax" in str(info.value)
    with pytest.raises(ValueError, match="valid ids"):
        check("nope", print)


def test_check_prints_on_success_and_asserts_on_failure(capsys):
    reference = get_exercise("ch02.causal_mask").load_reference()
    check("ch02.causal_mask", lambda n: reference(n))
    assert "ch02.causal_mask" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="inverted"):
        check("ch02.causal_mask", lambda n: ~np.tril(np.ones((n, n), dtype=bool)))
    with pytest.raises(AssertionError, match="NotImplementedError"):
        check("ch02.causal_mask", _stub, hidden=True)


def test_check_tells_a_learner_who_passes_the_course_s_own_answer(capsys):
    """In the notebook the reference is importable; the check says at once that it scores 0
    when graded, instead of a pass that grading takes back. A copy of its code is graded like
    any answer (copy detection flags it for the instructor, in every chapter the same)."""
    import types

    import transformer_ref.modules as ref
    from transformer_ref.np_attention import softmax

    class Disguised(ref.MultiHeadAttention):
        pass

    clone = types.FunctionType(softmax.__code__, softmax.__globals__, "my_softmax",
                               softmax.__defaults__)
    for exercise, fn, how in (("ch07.multi_head_attention", ref.MultiHeadAttention, "exactly"),
                              ("ch07.multi_head_attention", Disguised, "a subclass of")):
        with pytest.raises(AssertionError, match=f"you passed {how} the course's own .* scores 0"):
            check(exercise, fn)
    check("ch02.softmax", clone)
    assert "ch02.softmax" in capsys.readouterr().out


def _recorded_inputs(exercise_id: str) -> list:
    """The arguments the hidden checks pass to the learner's function."""
    reference = get_exercise(exercise_id).load_reference()
    seen: list = []

    def recording(*args, **kwargs):
        seen.append(copy.deepcopy((args, kwargs)))
        return reference(*args, **kwargs)

    assert grade_function(exercise_id, recording, hidden=True).passed
    return seen


def _same(a, b) -> bool:
    """Deep equality for the nested arrays, tensors, dicts, lists and scalars checks pass."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    if type(a).__name__ == "Tensor":
        return a.shape == b.shape and _same(a.detach().numpy(), b.detach().numpy())
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("exercise_id", exercises())
def test_hidden_inputs_follow_the_secret(monkeypatch, exercise_id):
    monkeypatch.setenv(SECRET_ENV, "course-2026-spring")
    first = _recorded_inputs(exercise_id)
    assert _same(first, _recorded_inputs(exercise_id))
    monkeypatch.setenv(SECRET_ENV, "course-2026-autumn")
    assert not _same(first, _recorded_inputs(exercise_id))


def test_secret_default_and_visible_seed(monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    default = seed_for("ch02.softmax", hidden=True)
    visible = seed_for("ch02.softmax", hidden=False)
    monkeypatch.setenv(SECRET_ENV, DEVELOPMENT_SECRET)
    assert seed_for("ch02.softmax", hidden=True) == default
    monkeypatch.setenv(SECRET_ENV, "another secret")
    assert seed_for("ch02.softmax", hidden=True) != default
    assert seed_for("ch02.softmax", hidden=False) == visible
    assert seed_for("ch02.causal_mask", hidden=False) != visible


def test_visible_messages_are_stable():
    def wrong(x, axis=-1):
        return np.exp(x) / np.exp(x).sum()

    assert grade_function("ch02.softmax", wrong).message == \
        grade_function("ch02.softmax", wrong).message


def test_compare_reports_largest_error_and_hint():
    expected = np.arange(6.0).reshape(2, 3)
    got = expected.copy()
    got[1, 2] += 0.5
    got[0, 1] += 0.1
    with pytest.raises(CheckFailure) as info:
        compare(got, expected, "y", hints=[Hint("never", buggy=-expected),
                                           Hint("off by half", buggy=got)])
    message = str(info.value)
    assert "2 of 6 values" in message and "index (1, 2)" in message
    assert "expected 5" in message and "got 5.5" in message
    assert message.endswith("Hint: off by half")


def test_compare_checks_type_shape_and_dtype():
    expected = np.zeros((2, 3, 5, 7))
    with pytest.raises(CheckFailure, match=r"expected shape \(2, 3, 5, 7\), got \(2, 3, 7, 5\)"):
        compare(np.zeros((2, 3, 7, 5)), expected, "out")
    with pytest.raises(CheckFailure, match="expected a NumPy array"):
        compare([[0.0]], np.zeros((1, 1)), "out")
    with pytest.raises(CheckFailure, match="expected a boolean array"):
        compare(np.full(3, 2.0), np.ones(3, dtype=bool), "mask")
    # Right values in the wrong dtype: the message says that the values are right.
    with pytest.raises(CheckFailure, match="0s and 1s are in the right places.*boolean"):
        compare(np.array([1, 0, 1]), np.array([True, False, True]), "mask")
    with pytest.raises(CheckFailure, match="expected a boolean array"):
        compare(np.array([1, 1, 1]), np.array([True, False, True]), "mask")
    # Right values in another float dtype pass, with a note; wrong ones fail as wrong values.
    with collect_notes() as notes:
        compare(np.ones(3), np.ones(3, dtype=np.float32), "pe", dtype=np.float32)
        compare(np.ones(4), np.ones(4, dtype=np.float32), "pe again", dtype=np.float32)
    assert len(notes) == 1  # one note per dtype, however many results show it
    [text] = notes.values()
    assert "pe came back float64 where the exercise asks for float32" in text
    assert "costs no points" in text and "was given float32 and returned float64" in text
    assert "np.sqrt(d_k)" not in text  # names what the learner's code did, not code it may lack
    with pytest.raises(CheckFailure, match="values differ"):
        compare(np.zeros(3), np.ones(3, dtype=np.float32), "pe", dtype=np.float32)
    # Integer and boolean kinds stay rules: ids and masks.
    with pytest.raises(CheckFailure, match="expected dtype int64, got int32"):
        compare(np.arange(3, dtype=np.int32), np.arange(3), "ids")
    with pytest.raises(CheckFailure, match="expected a floating-point array"):
        compare(np.arange(3), np.arange(3.0), "x")


def test_a_float64_answer_to_float32_inputs_passes_with_a_note_in_every_output(capsys):
    """NumPy 2 (NEP 50): a float32 array divided by np.sqrt(d_k), a NumPy float64, is float64."""
    def attention(q, k, v, mask=None):
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = weights / weights.sum(axis=-1, keepdims=True)
        return weights @ v, weights

    for hidden in (False, True):
        result = grade_function("ch02.scaled_dot_product_attention", attention, hidden)
        assert result.passed and len(result.notes) == 1 and result.rule is None
        first, note = result.message.split("\n")
        assert first.endswith("all passed.") and note == f"Note: {result.notes[0]}"
        assert "came back float64 where the exercise asks for float32" in note
    check("ch02.scaled_dot_product_attention", attention)
    printed = capsys.readouterr().out
    assert printed.startswith("ch02.scaled_dot_product_attention (visible checks): all passed.\n"
                              "Note: ")
    assert max(len(line) for line in printed.splitlines()[1:]) <= 100  # wrapped
    reference = get_exercise("ch02.scaled_dot_product_attention").load_reference()
    assert grade_function("ch02.scaled_dot_product_attention", reference).notes == ()


def test_a_failure_names_its_rule():
    reference = get_exercise("ch04.multi_head_attention").load_reference()
    result = grade_function("ch04.multi_head_attention",
                            lambda *args: reference(*args) if args[6] != 5 else (0, 0))
    assert result.passed or result.rule.startswith("ch04:")
    wrong = grade_function("ch02.causal_mask", lambda n: ~np.tril(np.ones((n, n), dtype=bool)))
    assert wrong.rule.startswith("ch02:") and wrong.rule.endswith(" compare")


def test_an_error_message_must_show_the_numbers_themselves():
    assert shows("d_model=13 is not divisible by num_heads=3", 3)
    assert not shows("d_model=13 is not divisible by 4", 3)  # 3 only inside 13
    assert not shows("p = 0.3", 3) and shows("3.", 3) and not shows("3.5", 3)

    def vague(n):
        raise ValueError(f"bad width 1{n}")

    with pytest.raises(CheckFailure, match="should show 5"):
        expect_raises(vague, ValueError, 5, reason="odd", mentions=(5,))
    assert isinstance(expect_raises(vague, Exception, 5, reason="odd"), ValueError)
    with pytest.raises(CheckFailure, match="should raise an error"):
        expect_raises(lambda n: n, Exception, 5, reason="odd")
    with pytest.raises(CheckFailure, match="not done yet"):
        expect_raises(_stub, Exception, 5, reason="odd")


def test_compare_tolerances_follow_the_course():
    expected64 = np.ones(4)
    compare(expected64 * (1 + 5e-5), expected64, "x")
    with pytest.raises(CheckFailure):
        compare(expected64 * (1 + 5e-4), expected64, "x")
    expected32 = np.ones(4, dtype=np.float32)
    compare(expected32 * np.float32(1 + 5e-4), expected32, "x")
    with pytest.raises(CheckFailure):
        compare(expected32 * np.float32(1 + 5e-3), expected32, "x")


def test_call_reports_in_place_changes():
    def scale(x):
        x *= 2
        return x

    with pytest.raises(CheckFailure, match="in place"):
        call(scale, np.ones(3))


def test_random_mask_never_masks_a_whole_row_and_always_matters():
    mask = random_mask(np.random.default_rng(0), (3, 2, 5, 6))
    assert mask.dtype == bool
    assert mask.any(axis=-1).all() and (~mask).any(axis=-1).all()


def test_register_rejects_bad_metadata():
    with pytest.raises(ValueError, match="difficulty"):
        register("ch02.extra", title="t", points=1, difficulty="trivial", minutes=1,
                 reference="m:f")
    with pytest.raises(ValueError, match="exercise id"):
        register("chapter2.extra", title="t", points=1, difficulty="easy", minutes=1,
                 reference="m:f")
    with pytest.raises(ValueError, match="module:attribute"):
        register("ch02.extra", title="t", points=1, difficulty="easy", minutes=1,
                 reference="m.f")
    assert "ch02.extra" not in exercises()


def test_import_is_light():
    code = ("import sys, autograder; assert 'torch' not in sys.modules; "
            "assert 'nbgrader' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert autograder.check is check
