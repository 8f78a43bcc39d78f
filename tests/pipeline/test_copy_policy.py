"""One policy for copies in every chapter: by default a flag never changes a score; an
instructor may choose another in the course's configuration, and it applies the same way."""

from __future__ import annotations

import copy
import shutil

import nbformat
import pytest

from autograder.cli import main
from autograder.copies.detect import (
    course_sources,
    reference_pairs,
    solution_cell,
    stub_hashes,
)
from autograder.copies.policy import (
    DEFAULT_POLICY,
    POLICIES,
    copy_policy,
    set_copy_policy,
    zeroed_cells,
)
from autograder.course import ROOT, Course
from autograder.exercises.registry import get_exercise
from autograder.flags import read_flags
from autograder.notebook import cell_source, grade_id, solution_cells

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")

# Long exercises of both libraries, chapter 6's among them (whose check once scored a passed
# copy of the course's own encoder block 0 where chapter 7 kept it).
VERBATIM = ("ch04.multi_head_attention", "ch06.encoder_block", "ch09.label_smoothing_loss")


def solution(exercise: str) -> str:
    chapter = get_exercise(exercise).chapter
    nb = nbformat.read(Course.of(ROOT).source_notebook(chapter), as_version=4)
    return next(cell_source(c) for _, c in solution_cells(nb)
                if grade_id(c) == solution_cell(exercise))


def test_a_verbatim_copy_gets_the_same_outcome_in_every_chapter_under_each_policy():
    course = Course.of(ROOT)
    sources = course_sources(course)
    outcomes: dict[str, set[bool]] = {policy: set() for policy in POLICIES}
    for exercise in VERBATIM:
        cell = solution_cell(exercise)
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
    next(c for _, c in solution_cells(nb) if grade_id(c) == solution_cell(exercise)).source = (
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
