"""Copy detection: copies of the course's code and between learners are flagged for the
instructor, with their source and similarity; honest answers are not; learners never see it;
one policy for copies, set in the course's configuration, applies in every chapter."""

from __future__ import annotations

import ast
import builtins
import copy
import importlib
import inspect
import shutil
import textwrap
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from copydetect import compare_files

from autograder.cli import main
from autograder.copies.common import shipped_common
from autograder.copies.detect import (
    check_chapter,
    course_sources,
    flags_of,
    reference_pairs,
    stub_hashes,
)
from autograder.copies.fingerprints import fingerprint, hashes_of, match
from autograder.copies.normalise import normalise
from autograder.copies.pairs import (
    COPIED_REFERENCE,
    DICTATED,
    MIN_TOKENS,
    NOISE_TOKENS,
    SIMILAR_SUBMISSIONS,
    THRESHOLD,
    ChapterCheck,
)
from autograder.copies.policy import (
    DEFAULT_POLICY,
    POLICIES,
    copy_policy,
    set_copy_policy,
    zeroed_cells,
)
from autograder.copies.prose import MIN_PROSE_WORDS, found_prose, prose, runs
from autograder.copies.report import render
from autograder.course import ROOT, Course
from autograder.exercises.registry import get_exercise
from autograder.flags import Flag, read_flags, write_flags
from autograder.notebook import cell_source, grade_id, solution_cells
from tests.fixtures.copies import DISGUISES, FORMS, disguise
from tests.fixtures.honest_styles import HONEST, honest_source
from tests.fixtures.sample_class import HONEST_KINDS, build_class

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")


def cell_of(exercise: str) -> str:
    return exercise.replace(".", "_") + "_solution"


@cache
def release(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(Course.of(ROOT).release_notebook(chapter), as_version=4)


@cache
def solution(exercise: str) -> str:
    chapter = get_exercise(exercise).chapter
    nb = nbformat.read(Course.of(ROOT).source_notebook(chapter), as_version=4)
    return next(cell_source(c) for _, c in solution_cells(nb) if grade_id(c) == cell_of(exercise))


def reference(exercise: str) -> str:
    module, attribute = get_exercise(exercise).reference.split(":")
    return textwrap.dedent(inspect.getsource(getattr(importlib.import_module(module), attribute)))


def graded_class(course_dir: Path, chapter: str, answers: dict[str, dict[str, str]]) -> Path:
    """Autograded notebooks of ``chapter``: the release with each learner's answers
    (exercise id -> source) in its solution cells, as grading leaves them."""
    for student, given in answers.items():
        nb = copy.deepcopy(release(chapter))
        for _, cell in solution_cells(nb):
            exercise = next((e for e in given if cell_of(e) == grade_id(cell)), None)
            if exercise is not None:
                cell.source = given[exercise]
        path = Course.of(ROOT, course_dir).notebook("autograded", student, chapter)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
    return course_dir


def codes(course_dir: Path, student: str, chapter: str) -> dict[str, set[str]]:
    """cell -> the copy flags of that cell."""
    found: dict[str, set[str]] = {}
    for flag in read_flags(Course.of(ROOT, course_dir), student, chapter):
        found.setdefault(flag.cell, set()).add(flag.code)
    return found


# ----------------------------------------------------------------------------- normalising


def test_normalising_sets_aside_names_comments_docstrings_layout_and_order():
    original = ('def scale(x: float, factor=2):\n    """Scale x."""\n    # double it\n'
                "    result = x * factor\n    return result\n\n\n"
                "def shift(x, by=1):\n    return x + by\n")
    disguised = ("def shift(v, amount=1):\n    return v + amount\n"
                 "def scale(value, k=2):\n    out = value*k  # the scaled value\n"
                 "    return out\n")
    ours, theirs = normalise(original), normalise(disguised)
    assert [u.name for u in ours] == ["", "scale", "shift"]
    assert [u.words for u in ours] == [u.words for u in theirs]  # what is compared
    assert [u.text for u in ours[1:]] == [u.text for u in theirs[1:]]
    whole = normalise(original)[0]
    assert "Scale x" not in whole.text and "double" not in whole.text
    assert "float" not in whole.text
    # Names the code only uses are kept: they say what it does.
    assert "np.tril" in normalise("def f(n):\n    return np.tril(np.ones((n, n)))\n")[0].text


def test_disguises_a_copier_makes_by_hand_read_like_the_original():
    """Helper methods renamed where they are called, equivalent spellings, asserts and an unused
    counter, a list built by a loop or a comprehension: the normalised form is the same."""
    original = ("class A:\n    def forward(self, q, k, d):\n"
                "        s = self._split(q @ k.transpose(-2, -1) / math.sqrt(d))\n"
                "        out = [self._split(r) for r in s]\n        return out\n\n"
                "    def _split(self, x):\n        return x.view(2, -1)\n")
    disguised = ("class A:\n    def forward(self, a, b, dim):\n        assert a.ndim == 3\n"
                 "        calls = 0\n"
                 "        scores = self.helper(torch.matmul(a, b.mT) * dim ** -0.5)\n"
                 "        result = []\n        for row in scores:\n"
                 "            result.append(self.helper(row))\n        calls += 1\n"
                 "        return result\n\n    def helper(self, t):\n"
                 "        return t.contiguous().reshape(2, -1)\n")
    assert [u.text for u in normalise(original)] == [u.text for u in normalise(disguised)]


def test_code_that_does_not_parse_is_still_compared_and_empty_code_is_nothing():
    units = normalise("def f(x):\n    return x +  # unfinished\n")
    assert len(units) == 1 and units[0].tokens and "unfinished" not in units[0].text
    assert normalise("# only a comment\n'''and a docstring'''\n") == []
    assert normalise("") == []


# ----------------------------------------------------------------------------- copies


# NumPy and PyTorch chapters, each copied from the solution notebook and from transformer_ref;
# one of them (sdpa) dictated by its exercise's text.
COPIED = ["ch02.scaled_dot_product_attention", "ch04.multi_head_attention",
          "ch09.label_smoothing_loss", "ch11.decoder_only_block"]


def copied_flags(course_dir: Path, student: str, chapter: str) -> list[Flag]:
    return [f for f in read_flags(Course.of(ROOT, course_dir), student, chapter)
            if f.code == COPIED_REFERENCE]


def but_docstrings(code: str) -> str:
    """Every disguise but dropping the docstrings and comments: a hasty copier's paste."""
    return disguise(code, *(way for way in DISGUISES if way != "docstrings and comments dropped"))


@pytest.mark.parametrize("exercise", COPIED)
def test_copies_of_the_courses_code_are_flagged_however_disguised(exercise, tmp_path):
    """Every paste is flagged, verbatim, reformatted, renamed or inside a longer cell, and
    disguised in each way of :data:`DISGUISES` alone, all combined and all but dropping the
    docstrings, except where the exercise's text dictates the code line by line
    (:data:`DICTATED`). There a learner who follows the text writes the solution
    (``literal_followers``), so the solution is base code and pastes of it in any form are what
    honest work looks like; so is the code of a paste of
    transformer_ref whose only lines beyond the dictated code are argument checks (sdpa's),
    which a copier leaves out at will and normalising sets aside. What still gives such a paste
    away is the course's own docstring, which the release does not show: every paste that keeps
    it is flagged."""
    chapter = get_exercise(exercise).chapter
    answers = {f"{origin}-{form.replace(' ', '-')}": {exercise: change(code)}
               for origin, code in (("solution", solution(exercise)),
                                    ("reference", reference(exercise)))
               for form, change in FORMS.items()}
    answers |= {f"reference-{way.replace(' ', '-')}": {exercise: change(reference(exercise))}
                for way, change in (DISGUISES | {"all": disguise,
                                                 "all-but-docstrings": but_docstrings}).items()}
    answers["reference-verbatim-again"] = answers["reference-verbatim"]
    dictated = exercise in DICTATED
    docstring = ast.get_docstring(ast.parse(reference(exercise)).body[0])
    caught = {student for student, answer in answers.items() if not dictated or (
        student.startswith("reference")
        and ast.get_docstring(ast.parse(answer[exercise]).body[0]) == docstring)}
    assert dictated or caught == set(answers)
    assert not dictated or {"reference-verbatim", "reference-renamed-all"} <= caught
    course_dir = graded_class(tmp_path, chapter, answers)
    check = check_chapter(Course.of(ROOT, course_dir), chapter)
    assert sorted(check.students) == sorted(answers)
    for student in caught:
        flags = copied_flags(course_dir, student, chapter)
        assert [f.cell for f in flags] == [cell_of(exercise)], (student, flags)
        reason = flags[0].reason
        # The solution and the reference may be one code: either names the course's file.
        assert "solutions/" in reason or "transformer_ref/" in reason, reason
        assert "% of the course's own code" in reason and "% of this answer comes" in reason
        assert "other learner(s) of the cell hold most of the shared code too" in reason
        assert f"similarity/{chapter}.html" in reason
        if dictated:
            assert "words of the course's own docstrings and comments" in reason
    for student in set(answers) - caught:  # what a literal follower writes
        assert copied_flags(course_dir, student, chapter) == [], student
    # The learners who handed in the same code are alike.
    if not dictated:
        similar = codes(course_dir, "reference-verbatim", chapter)[cell_of(exercise)]
        assert SIMILAR_SUBMISSIONS in similar


def test_the_flag_names_the_definition_pasted_into_a_longer_cell(tmp_path):
    exercise = "ch09.label_smoothing_loss"
    pasted = ("def my_own_helper(n):\n    return list(range(n))\n\n\n"
              + reference(exercise) + "\n\nprint(my_own_helper(3))\n")
    course_dir = graded_class(tmp_path, "ch09_training", {"zoe": {exercise: pasted}})
    check_chapter(Course.of(ROOT, course_dir), "ch09_training")
    (flag,) = read_flags(Course.of(ROOT, course_dir), "zoe", "ch09_training")
    assert flag.code == COPIED_REFERENCE
    assert "transformer_ref/training/losses.py (LabelSmoothingLoss" in flag.reason
    assert "100%" in flag.reason


def test_one_line_answers_never_flag_everyone(tmp_path):
    """Every correct causal mask looks alike: too short to say anything."""
    answers = {name: {"ch02.causal_mask": solution("ch02.causal_mask")}
               for name in ("amy", "bo", "cy")}
    course_dir = graded_class(tmp_path, "ch02_attention", answers)
    check = check_chapter(Course.of(ROOT, course_dir), "ch02_attention")
    assert check.flags == {}
    assert all(p.tokens < MIN_TOKENS for p in check.pairs)
    assert all(not (course_dir / "flags" / name).exists() for name in answers)


# A short padding mask of one's own: no honest answer of the corpus writes it this way.
OWN_PADDING_MASK = """def padding_mask(lengths, max_len):
    grid = np.tile(np.arange(max_len), (len(lengths), 1))
    return np.expand_dims(np.less(grid, np.reshape(lengths, (-1, 1))), axis=1)
"""


def test_a_short_answer_most_of_the_class_hands_in_is_common_not_copied(tmp_path):
    """Two learners alone with the same short answer of their own, rare in the honest corpus,
    are flagged; the same answer handed in by most of a class is what the class writes, and
    the course's own short answer is their common source: neither is flagged between them."""
    answer = {"ch02.padding_mask": OWN_PADDING_MASK}
    pair = graded_class(tmp_path / "pair", "ch02_attention", {"amy": answer, "bo": answer})
    check = check_chapter(Course.of(ROOT, pair), "ch02_attention")
    assert {flag.code for flags in check.flags.values() for flag in flags} == {
        SIMILAR_SUBMISSIONS}, check.flags
    crowd = graded_class(tmp_path / "crowd", "ch02_attention",
                         {name: answer for name in ("amy", "bo", "cy", "di", "ed")})
    assert check_chapter(Course.of(ROOT, crowd), "ch02_attention").flags == {}
    course = {"ch02.padding_mask": solution("ch02.padding_mask")}
    pasted = graded_class(tmp_path / "course", "ch02_attention", {"amy": course, "bo": course})
    assert check_chapter(Course.of(ROOT, pasted), "ch02_attention").flags == {}


# Long exercises of both libraries, chapter 6's among them (whose check once scored a passed
# copy of the course's own encoder block 0 where chapter 7 kept it).
VERBATIM = ("ch04.multi_head_attention", "ch06.encoder_block", "ch09.label_smoothing_loss")


def test_a_verbatim_copy_gets_the_same_outcome_in_every_chapter_under_each_policy():
    course = Course.of(ROOT)
    sources = course_sources(course)
    outcomes: dict[str, set[bool]] = {policy: set() for policy in POLICIES}
    for exercise in VERBATIM:
        cell = cell_of(exercise)
        given = stub_hashes(course, get_exercise(exercise).chapter)
        pairs = reference_pairs({"eve": {cell: solution(exercise)}}, sources, given)
        assert [p.learner.owner for p in pairs if p.flagged(0.95)] == ["eve"], exercise
        for policy in POLICIES:
            outcomes[policy].add(cell in zeroed_cells(pairs, policy, 0.95).get("eve", ()))
    assert outcomes == {"flag": {False}, "zero-verbatim": {True}, "zero-copied": {True}}


def test_the_policy_is_a_setting_of_the_course_and_a_zero_is_a_manual_score(tmp_path):
    """The default leaves the gradebook alone; ``zero-verbatim`` gives the copied exercise's
    test cell a manual score of 0 (the Formgrader's override) and says so in the flag; back to
    ``flag``, the automatic score returns."""
    from autograder.grade.gradebook import read_scores, save_grades
    from autograder.steps.release import generate

    chapter, exercise = "ch04_multi_head_attention", "ch04.multi_head_attention"
    root, course_dir = tmp_path / "root", tmp_path / "root" / "course"
    shutil.copytree(ROOT / "solutions" / chapter, root / "solutions" / chapter)
    course = Course.of(root, course_dir)
    generate(course, [chapter])
    nb = copy.deepcopy(nbformat.read(course.release_notebook(chapter), as_version=4))
    next(c for _, c in solution_cells(nb) if grade_id(c) == cell_of(exercise)).source = (
        solution(exercise))
    path = course.notebook("autograded", "eve", chapter)
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    save_grades(course, "eve", chapter, nb, None, flagged=False)
    (before,) = read_scores(course)

    def checked(policy: str) -> tuple[float, str]:
        # The command sets the course's policy and checks the chapter under it.
        where = ["--root", str(root), "--course-dir", str(course_dir)]
        assert main(["similarity", chapter, "--policy", policy, *where]) == 1
        assert copy_policy(course) == policy
        (flag,) = [f for f in read_flags(course, "eve", chapter) if f.code == "copied_reference"]
        (score,) = read_scores(course)
        return before.score - score.score, flag.reason

    assert copy_policy(course) == DEFAULT_POLICY == "flag"
    lost, reason = checked("flag")
    assert lost == 0 and "never change a score" in reason
    lost, reason = checked("zero-verbatim")
    points = get_exercise(exercise).points
    assert lost == points and "(zero-verbatim) scores this exercise 0" in reason
    lost, _ = checked("flag")
    assert lost == 0
    with pytest.raises(ValueError, match="one of flag, zero-verbatim, zero-copied"):
        set_copy_policy(course, "zero")


# ----------------------------------------------------------------------------- the class


def test_a_learner_who_copies_another_is_flagged_with_the_others_name(tmp_path):
    honest = next(h for h in HONEST if h.exercise == "ch09.greedy_decode")
    original = honest_source(honest)
    answers = {"ann": {honest.exercise: original},
               "bob": {honest.exercise: FORMS["renamed"](original)},
               "cat": {}}
    course_dir = graded_class(tmp_path, "ch09_training", answers)
    check_chapter(Course.of(ROOT, course_dir), "ch09_training")
    cell = cell_of(honest.exercise)
    for student, other in (("ann", "bob"), ("bob", "ann")):
        (flag,) = read_flags(Course.of(ROOT, course_dir), student, "ch09_training")
        assert (flag.code, flag.cell) == (SIMILAR_SUBMISSIONS, cell)
        assert f"that of {other} (100%" in flag.reason, flag.reason
    assert read_flags(Course.of(ROOT, course_dir), "cat", "ch09_training") == []


@pytest.mark.parametrize("chapter", sorted({get_exercise(h.exercise).chapter for h in HONEST}))
def test_honest_learners_following_the_hints_or_a_tutorial_are_not_flagged(chapter, tmp_path):
    answers: dict[str, dict[str, str]] = {}
    for entry in HONEST:
        if get_exercise(entry.exercise).chapter == chapter:
            answers.setdefault(entry.learner, {})[entry.exercise] = honest_source(entry)
    course_dir = graded_class(tmp_path, chapter, answers)
    check = check_chapter(Course.of(ROOT, course_dir), chapter)
    assert check.flags == {}, [p for p in check.pairs if p.flagged(check.threshold)]
    assert check.report is not None and check.report.is_file()


def test_the_dictated_exercises_are_those_where_honest_work_reaches_the_threshold(
        benchmark_script):
    """DICTATED is what the calibration finds: the exercises where an honest answer (a literal
    hint-follower, a learner of the sample class, a mutant) reaches the flag in normalised
    form against the course's code or another honest learner. A new exercise, a new honest
    answer or a changed solution that moves one in or out must update the list."""
    calibration = benchmark_script("similarity_calibration")
    assert calibration.dictated_exercises(course_sources(Course.of(ROOT))) == DICTATED


def test_the_corpus_of_honest_answers_that_ships_is_the_calibrations(benchmark_script):
    """``common_code.json`` is the honest corpus as it is now: a new or changed honest answer
    must write it again (``similarity_calibration.py --write-common``)."""
    calibration = benchmark_script("similarity_calibration")
    assert shipped_common() == {cell: tuple(words)
                                for cell, words in calibration.shipped_corpus().items()}


def test_an_honest_softmax_with_its_own_guard_is_not_flagged_left_out_of_the_corpus(
        benchmark_script):
    """The class trial's softmax, measured against what the other honest answers write alike
    (never against itself): short, canonical and not rare, so no evidence."""
    calibration = benchmark_script("similarity_calibration")
    entry = next(h for h in HONEST if (h.exercise, h.learner) == ("ch02.softmax", "own-a"))
    course = Course.of(ROOT)
    given = calibration.without(stub_hashes(course, "ch02_attention", common={}),
                                frozenset({entry.learner}))
    pairs = reference_pairs({"own-a": {cell_of(entry.exercise): honest_source(entry)}},
                            course_sources(course), given)
    assert pairs and not [p for p in pairs if p.flagged(THRESHOLD)]


# An honest softmax with the stub's docstring kept and comments of the learner's own on the
# same ideas as the course's docstring.
COMMENTED_SOFTMAX = '''def softmax(x, axis=-1):
    """Numerically stable softmax of x along axis.

    Args:
        x: float array of any shape (a list works too).
        axis: int, the axis along which the result sums to 1.

    Returns:
        float array with the shape and float dtype of x, non-negative, summing to 1
        along axis. Entries equal to -inf get weight 0.
    """
    x = np.asarray(x)
    # Subtract the largest logit of each slice: the result is the same, and exp of a big
    # logit such as 1e4 would overflow to inf otherwise. Masked logits of -inf become 0.
    top = x.max(axis=axis, keepdims=True)
    e = np.exp(x - top)
    return e / e.sum(axis=axis, keepdims=True)  # each slice sums to 1 along axis
'''


def test_a_short_paste_keeping_the_courses_words_is_flagged_and_honest_words_are_not():
    """Short code is what honest learners write, so only what a paste keeps beyond it is
    evidence: the reference's docstring, which the release never shows. A pasted reference
    softmax with its locals renamed is flagged and the flag quotes the course's words; an
    honest softmax with the stub's docstring and comments of its own on the same ideas is
    not; a paste with every docstring and comment dropped is short canonical code, no
    evidence."""
    course = Course.of(ROOT)
    cell = cell_of("ch02.softmax")
    pasted = reference("ch02.softmax")
    answers = {"copier": {cell: disguise(pasted, "renamed all", "rewritten")},
               "honest": {cell: COMMENTED_SOFTMAX},
               "stripped": {cell: disguise(pasted, "docstrings and comments dropped")}}
    pairs = reference_pairs(answers, course_sources(course),
                            stub_hashes(course, "ch02_attention"))
    flagged = {p.learner.owner: p for p in pairs if p.flagged(THRESHOLD)}
    assert set(flagged) == {"copier"}, flagged
    assert flagged["copier"].prose >= MIN_PROSE_WORDS and flagged["copier"].tokens < MIN_TOKENS
    assert all(p.prose == 0 for p in pairs if p.learner.owner != "copier")
    (reason,) = [f.reason for f in flags_of(pairs, "ch02_attention")["copier"]]
    assert "words of the course's own docstrings and comments" in reason
    assert "subtracting the maximum changes nothing mathematically" in reason
    page = render(ChapterCheck("ch02_attention", THRESHOLD, sorted(answers), pairs, {}))
    assert "words of the course's own docstrings and comments" in page
    assert "subtracting the maximum changes nothing mathematically" in page


def test_on_a_dictated_exercise_learners_are_alike_only_in_what_the_text_leaves_open(tmp_path):
    """Two literal hint-followers write the same DecoderLayer and are not flagged; a learner who
    copies another's own way of writing it (its helper functions, names, docstring) is."""
    exercise = "ch08.decoder_layer"
    assert exercise in DICTATED
    entries = {h.learner: honest_source(h) for h in HONEST if h.exercise == exercise}
    answers = {"lia": {exercise: entries["literal-a"]}, "lou": {exercise: entries["literal-b"]},
               "ana": {exercise: entries["hint-a"]}, "bea": {exercise: entries["hint-a"]}}
    course_dir = graded_class(tmp_path, "ch08_decoder_and_model", answers)
    check = check_chapter(Course.of(ROOT, course_dir), "ch08_decoder_and_model")
    assert set(check.flags) == {"ana", "bea"}, check.flags
    for student, other in (("ana", "bea"), ("bea", "ana")):
        (flag,) = read_flags(Course.of(ROOT, course_dir), student, "ch08_decoder_and_model")
        assert flag.code == SIMILAR_SUBMISSIONS and f"that of {other} (100%" in flag.reason


def test_no_honest_learner_of_the_sample_class_is_flagged_and_the_pasters_are(tmp_path):
    rows = build_class(tmp_path / "class")
    course = Course.of(ROOT, tmp_path / "course")
    for row in rows:
        submitted = tmp_path / "class" / row.learner / row.chapter / f"{row.chapter}.ipynb"
        try:
            nb = nbformat.read(submitted, as_version=4)
        except Exception:
            continue  # the broken files: grading gives them the release's stubs
        path = course.notebook("autograded", row.learner, row.chapter)
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    course_dir = course.folder
    for chapter in sorted({row.chapter for row in rows}):
        check_chapter(Course.of(ROOT, course_dir), chapter)
    for row in rows:
        found = {f.code for f in read_flags(Course.of(ROOT, course_dir), row.learner, row.chapter)}
        if row.kind in HONEST_KINDS:
            assert found == set(), (row.learner, row.chapter, found)
        assert {c for c in row.expected_flags if c in (COPIED_REFERENCE,
                                                        SIMILAR_SUBMISSIONS)} <= found, row


# ----------------------------------------------------------------------------- the records


def test_checking_again_gives_the_same_flags_and_report_and_keeps_other_flags(tmp_path):
    exercise = "ch04.multi_head_attention"
    answers = {"ann": {exercise: solution(exercise)}, "bob": {exercise: reference(exercise)}}
    course_dir = graded_class(tmp_path, "ch04_multi_head_attention", answers)
    write_flags(Course.of(ROOT, course_dir), "ann", "ch04_multi_head_attention", "grade",
                [Flag("cell_error", "x", "raised")])
    first = check_chapter(Course.of(ROOT, course_dir), "ch04_multi_head_attention")
    files = {p: p.read_bytes() for p in sorted(course_dir.rglob("*")) if p.is_file()}
    again = check_chapter(Course.of(ROOT, course_dir), "ch04_multi_head_attention")
    assert {p: p.read_bytes() for p in sorted(course_dir.rglob("*")) if p.is_file()} == files
    assert again.flags == first.flags
    ann = {f.code
           for f in read_flags(Course.of(ROOT, course_dir), "ann", "ch04_multi_head_attention")}
    assert ann == {"cell_error", COPIED_REFERENCE}


def test_the_report_shows_the_pairs_side_by_side_as_inert_text(tmp_path):
    exercise = "ch02.softmax"
    hostile = solution(exercise).replace(
        "    return exp", "    label = '<script>alert(1)</script>'\n    return exp")
    assert "<script>" in hostile
    course_dir = graded_class(tmp_path, "ch02_attention", {"eve": {exercise: hostile}})
    check = check_chapter(Course.of(ROOT, course_dir), "ch02_attention")
    page = check.report.read_text(encoding="utf-8")
    assert check.report == course_dir / "similarity" / "ch02_attention.html"
    assert "<script" not in page and "&lt;script&gt;" in page  # learners' code is text
    assert "<mark>" in page and "flagged" in page
    assert "solutions/ch02_attention/ch02_attention.ipynb" in page
    # The chapter's dictated exercise is compared otherwise, and the page says how.
    assert "ch02.scaled_dot_product_attention: the exercise's text dictates" in page


def test_the_command_prints_the_flagged_pairs_and_rejects_a_bad_threshold(tmp_path, capsys):
    exercise = "ch04.multi_head_attention"
    course_dir = graded_class(tmp_path, "ch04_multi_head_attention",
                              {"eve": {exercise: solution(exercise)}})
    where = ["--course-dir", str(course_dir)]
    assert main(["similarity", "ch04", *where]) == 1
    printed = capsys.readouterr().out
    assert "eve" in printed and COPIED_REFERENCE in printed and "100%" in printed
    assert main(["similarity", "ch04", "--threshold", "1.5", *where]) == 2
    assert "in (0, 1]" in capsys.readouterr().err
    assert main(["similarity", "ch04", "--threshold", "1", *where]) == 1


def test_copy_flags_are_in_the_csv_and_never_in_the_learners_feedback(tmp_path):
    from autograder.grade.gradebook import save_grades
    from autograder.steps.feedback import generate_feedback
    from autograder.steps.release import generate
    from autograder.steps.report import export_csv

    chapter, exercise = "ch04_multi_head_attention", "ch04.multi_head_attention"
    root, course_dir = tmp_path / "root", tmp_path / "root" / "course"
    shutil.copytree(ROOT / "solutions" / chapter, root / "solutions" / chapter)
    generate(Course.of(root, course_dir), [chapter])
    course = Course.of(root, course_dir)
    for student in ("eve", "fay"):
        nb = copy.deepcopy(nbformat.read(course.release_notebook(chapter), as_version=4))
        next(c for _, c in solution_cells(nb) if grade_id(c) == cell_of(exercise)).source = (
            solution(exercise))
        path = course.notebook("autograded", student, chapter)
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
        save_grades(course, student, chapter, nb, None, flagged=False)
    check_chapter(Course.of(root, course_dir), chapter)
    assert {f.code for f in read_flags(Course.of(ROOT, course_dir), "eve", chapter)} == {
        COPIED_REFERENCE, SIMILAR_SUBMISSIONS}

    text = export_csv(Course.of(root, course_dir))
    assert "copied_reference;similar_submissions" in text and "fay (100%" in text
    pages = generate_feedback(Course.of(root, course_dir), [chapter]).written
    assert len(pages) == 2
    for page in pages:
        html = page.read_text(encoding="utf-8")
        for word in (COPIED_REFERENCE, SIMILAR_SUBMISSIONS, "course's own code", "similarity/",
                     "fay (", "eve ("):
            assert word not in html, (page, word)


def test_the_report_shows_every_cells_closest_pairs_and_the_formgrader_links_to_it(tmp_path):
    """Honest short answers are not flagged, yet each cell's closest pairs are on the page,
    each learner's reachable by an anchor; the Formgrader serves the page to logged-in users
    and links each submission's copy flags to it."""
    from jupyter_server.base.handlers import AuthenticatedFileHandler
    from nbgrader.coursedir import CourseDirectory

    from autograder.course import course_config
    from autograder.nbgrader_hooks.formgrader import STATIC, TEMPLATES, CourseFormgrader

    entries = {(h.exercise, h.learner): honest_source(h) for h in HONEST}
    answers = {"ann": {e: entries[e, "own-a"] for e in ("ch02.softmax", "ch02.causal_mask")},
               "bob": {"ch02.softmax": entries["ch02.softmax", "literal-a"]}}
    course_dir = graded_class(tmp_path / "course", "ch02_attention", answers)
    check = check_chapter(Course.of(ROOT, course_dir), "ch02_attention")
    assert check.flags == {}
    page = check.report.read_text(encoding="utf-8")
    for cell in ("ch02_softmax_solution", "ch02_causal_mask_solution"):
        assert f"{cell}: ann" in page, cell
    assert 'id="learner-ann"' in page and 'id="learner-bob"' in page

    config = course_config(ROOT, course_dir)
    formgrader = CourseFormgrader(config=config)
    formgrader.coursedir = CourseDirectory(config=config)
    routes: list[tuple] = []
    app = type("App", (), {"settings": {"base_url": "/"},
                           "add_handlers": lambda self, host, found: routes.extend(found)})()
    formgrader.init_handlers(app)
    served = next(r for r in routes if r[0] == "/formgrader/course/similarity/(.*)")
    assert served[1] is AuthenticatedFileHandler
    assert Path(served[2]["path"]) == check.report.parent
    assert ("/formgrader/course/similarity/{{ assignment_id }}.html"
            in (TEMPLATES / "manage_submissions.tpl").read_text(encoding="utf-8"))
    assert '"#learner-"' in (STATIC / "submissions.js").read_text(encoding="utf-8")


def test_a_match_measures_what_copydetect_measures():
    """:func:`match` counts the shared runs and shares as ``copydetect.compare_files`` does, on
    the course's own units against each other (boilerplate removed from one side, so runs
    have gaps): the same tokens, shares and highlighted ranges."""
    units = [code.unit for code in course_sources(Course.of(ROOT))[:120]]
    boilerplate = set(sorted(hashes_of(units[:3], NOISE_TOKENS))[:60])
    printed = [fingerprint(u, NOISE_TOKENS, boilerplate if i % 2 else frozenset())
               for i, u in enumerate(units)]
    compared = 0
    for a, b in [(a, b) for a in printed for b in printed if a is not b][::40]:
        ours = match(a, b)
        theirs = compare_files(*(SimpleNamespace(
            k=p.k, hashes=p.hashes, hash_idx=p.hash_idx, token_coverage=p.token_coverage,
            filtered_code=p.unit.words, offsets=[]) for p in (a, b)))
        if ours is None:
            assert theirs[0] == 0
            continue
        compared += 1
        (slices_a, slices_b) = theirs[2]
        assert ours.tokens[0] == int(sum(slices_a[1] - slices_a[0]))
        assert ours.tokens[1] == int(sum(slices_b[1] - slices_b[0]))
        assert ours.shares == tuple(min(1.0, float(s)) for s in theirs[1])
        assert [len(r) for r in ours.regions] == [len(slices_a[0]), len(slices_b[0])]
    assert compared > 20


def test_prose_is_the_words_of_comments_and_docstrings_not_code_messages_or_quotes():
    """The words a paste keeps: comments and docstrings of four words or more; not a message,
    a key or a short comment, nor a quotation of someone else; code that does not parse still
    gives its comments up to the fault."""
    source = ('def f(x, mode="mean"):\n'
              '    """Scale x by the paper\'s factor, which "found that the two versions '
              'produced nearly identical results" says."""\n'
              '    w = params["w_q"]  # keep the gradient flowing through the residual path\n'
              '    y = x @ w  # (batch, seq)\n'
              '    raise ValueError(f"f: x must be a float array, got {x.dtype}")\n')
    assert " ".join(prose(source)) == ("scale x by the paper s factor which says keep the "
                                       "gradient flowing through the residual path")
    assert prose("# a comment of five words\ndef g(:\n") == (
        "a", "comment", "of", "five", "words")
    found = found_prose(prose(source), runs(prose("# keep the gradient flowing through the "
                                                  "residual path, always\n")), frozenset())
    assert found.words == 8 and found.passages == (
        "keep the gradient flowing through the residual path",)


def free_names(code: str) -> set[str]:
    """The names ``code`` reads without binding them (what its notebook must provide)."""
    tree = ast.parse(code)
    bound = {node.arg if isinstance(node, ast.arg) else node.name
             for node in ast.walk(tree) if isinstance(
                 node, ast.arg | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    bound |= {node.id for node in ast.walk(tree)
              if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)}
    bound |= {(alias.asname or alias.name).split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.Import | ast.ImportFrom) for alias in node.names}
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)} - bound - set(dir(builtins))


def test_every_disguise_leaves_code_that_reads_only_what_the_original_reads(benchmark_script):
    """The calibration's copies are what a copier would hand in: no disguise, alone or
    combined, reads a name that it does not bind and the original does not read either (a
    renamed name missed, a trimmed check whose name is used below, a library the cell never
    names)."""
    calibration = benchmark_script("similarity_calibration")
    broken = [(exercise, origin, way, sorted(extra))
              for exercise, origin, code in calibration.originals()
              for way in calibration.WAYS
              if (extra := free_names(calibration.disguised(code, way)) - free_names(code))]
    assert broken == []
