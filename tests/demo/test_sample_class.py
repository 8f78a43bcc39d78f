"""The sample class: deterministic, as described by expected.csv, and graded as expected."""

from __future__ import annotations

import ast
import base64
import csv
import importlib
import io
import re
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder import grade_function
from autograder.exercises.registry import all_exercises, earlier_functions
from autograder.grade.audit import audit_notebook
from tests.fixtures.sample_class import (
    BUGS,
    CHAPTERS,
    HONEST_KINDS,
    LEARNERS,
    build_class,
    compare,
    read_expected,
)

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, list]:
    out = tmp_path_factory.mktemp("class")
    rows = build_class(out / "class", zip_path=out / "class.zip")
    return out, rows


def notebook_path(out: Path, learner: str, chapter: str) -> Path:
    return out / "class" / learner / chapter / f"{chapter}.ipynb"


def test_the_class_covers_every_kind_of_learner(sample) -> None:
    _, rows = sample
    assert len({r.learner for r in rows}) >= 12
    kinds = {r.kind for r in rows}
    for kind in ("honest", "alternative", "partial", "buggy", "stub", "cheat-monkeypatch",
                 "cheat-reads-solutions", "cheat-imports-reference", "cheat-edits-test-cell",
                 "cheat-deletes-test-cell", "broken-json", "empty-notebook"):
        assert kind in kinds
    assert {r.chapter for r in rows} == set(CHAPTERS)
    honest_full = [r for r in rows if r.kind in ("honest", "alternative")]
    assert honest_full and all(r.expected_score == r.max_score for r in honest_full)


def test_expected_csv_round_trips_and_files_are_deterministic(sample, tmp_path) -> None:
    out, rows = sample
    assert read_expected(out / "class" / "expected.csv") == rows
    with open(out / "class" / "expected.csv", encoding="utf-8") as handle:
        assert next(csv.reader(handle))[:4] == ["learner", "chapter", "kind", "expected_score"]
    again = build_class(tmp_path / "class", zip_path=tmp_path / "class.zip")
    assert again == rows
    for path in sorted((out / "class").rglob("*")):
        if path.is_file():
            twin = tmp_path / "class" / path.relative_to(out / "class")
            assert twin.read_bytes() == path.read_bytes(), path
    assert (tmp_path / "class.zip").read_bytes() == (out / "class.zip").read_bytes()
    with zipfile.ZipFile(out / "class.zip") as archive:
        assert len(archive.namelist()) == len(rows)
        assert "ada_ch02_attention.ipynb" in archive.namelist()


def test_honest_kinds_score_as_expected_when_run_directly(sample) -> None:
    """Run the answers of every non-cheating learner in this process (no kernel): the points
    of the exercises whose visible and hidden checks pass equal expected.csv."""
    out, rows = sample
    for row in rows:
        if row.kind not in HONEST_KINDS:
            continue
        nb = nbformat.read(notebook_path(out, row.learner, row.chapter), as_version=4)
        namespace: dict = {}
        exec(_setup_imports(nb), namespace)  # what the notebook's setup cell imports
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("solution"):
                try:
                    exec(cell.source, namespace)  # stubs define functions that raise later
                except Exception as exc:  # pragma: no cover - a broken answer cell
                    pytest.fail(f"{row.learner}/{row.chapter}: {exc!r}")
        # The later exercises call the earlier ones of the notebook, as in a kernel.
        score = sum(e.points for e in all_exercises() if e.chapter == row.chapter and all(
            grade_function(e.id, fn := namespace.get(e.defines), hidden=h,
                           earlier=earlier_functions(e, fn)).passed
            for h in (False, True)))
        assert score == row.expected_score, f"{row.learner}/{row.chapter} ({row.kind})"


def _setup_imports(nb) -> str:
    """The import statements of a notebook's cells without nbgrader metadata (its setup)."""
    statements = []
    for cell in nb.cells:
        if cell.cell_type == "code" and not cell.metadata.get("nbgrader"):
            tree = ast.parse(cell.source)
            statements += [ast.unparse(node) for node in tree.body
                           if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(statements)


def test_the_audit_finds_the_cheats_and_nothing_in_honest_work(sample) -> None:
    out, rows = sample
    for row in rows:
        try:
            nb = nbformat.read(notebook_path(out, row.learner, row.chapter), as_version=4)
        except Exception:
            assert row.kind in ("broken-json", "empty-file")
            continue
        codes = {f"audit:{f.code}" for f in audit_notebook(nb)}
        if row.kind in HONEST_KINDS:
            assert codes == set(), f"{row.learner}/{row.chapter}: {codes}"
        for flag in row.expected_flags:
            if flag.startswith("audit:"):
                assert flag in codes, f"{row.learner}/{row.chapter}: {codes}"


def test_compare_reports_wrong_scores_missing_flags_and_flagged_honest_work(sample) -> None:
    _, rows = sample
    graded = {(r.learner, r.chapter): (r.expected_score, set(r.expected_flags)) for r in rows}
    assert compare(rows, graded).ok
    ada = ("ada", CHAPTERS[0])
    finn = ("finn", CHAPTERS[0])
    graded[ada] = (0.0, {"verification_failed"})
    graded[finn] = (graded[finn][0], set())
    problems = compare(rows, graded).problems
    assert any("ada" in p and "score 0" in p for p in problems)
    assert any("ada" in p and "honest work flagged" in p for p in problems)
    assert any("finn" in p and "lack" in p for p in problems)
    del graded[ada]
    assert any("not graded" in p for p in compare(rows, graded).problems)


def test_bad_arguments(tmp_path) -> None:
    with pytest.raises(ValueError, match="covers"):
        build_class(tmp_path, chapters=["ch09_training"])
    with pytest.raises(ValueError, match="unknown learners"):
        build_class(tmp_path, learners=["zed"])
    with pytest.raises(FileNotFoundError, match="release"):
        build_class(tmp_path, root=tmp_path)


# Learners covering every kind of cheat and broken file, honest work in both chapters, and bugs
# that a later exercise builds on (the other honest kinds are checked above without a kernel, to
# keep this test short).
END_TO_END = ("dev", "finn", "gus", "hana", "ivy", "jack", "kim", "lee", "mo")
# Chapter 12's sample work is graded in-process above; grading its notebooks in the sandbox
# too (about 20 s each on 2 shared cores) would exercise no other part of the pipeline.
END_TO_END_CHAPTERS = CHAPTERS[:3]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The sample class's learners of :data:`END_TO_END`, released, collected, autograded with
    2 workers, with feedback and the grades CSV, in a temporary course (the demo's run)."""
    from tests.fixtures.demo import run_demo

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUTOGRADER_SECRET", "sample-class-test-secret")
        yield run_demo(tmp_path_factory.mktemp("demo") / "demo", jobs=2,
                       chapters=END_TO_END_CHAPTERS, learners=END_TO_END)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_pipeline_grades_the_class_as_expected(graded) -> None:
    """Release, collect, autograde with 2 workers, feedback, grades CSV and audit, in a
    temporary course; every score and flag agrees with expected.csv."""
    from tests.fixtures.demo import table

    result = graded
    assert set(END_TO_END) <= set(LEARNERS)
    assert result.comparison.ok, "\n".join([table(result.rows), *result.comparison.problems])
    assert {r.learner for r in result.rows} == set(END_TO_END)
    with open(result.grades_csv, encoding="utf-8") as handle:
        exported = {(r["student"], r["chapter"]) for r in csv.DictReader(handle)}
    assert exported == {(r.learner, r.chapter) for r in result.rows}
    readable = [r for r in result.rows if r.kind not in ("broken-json", "empty-file")]
    assert len(result.feedback) >= len(readable) - 1  # the notebook without cells may have none


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_item_analysis_counts_each_mutants_hint(graded, capsys) -> None:
    """``analysis`` on the graded class: the one buggy learner's mutants each count once under
    their hint, and nothing else counts; a histogram; no learner named unless asked."""
    from autograder.cli import main
    from autograder.steps.analysis import hint_id, hint_of
    from tests.fixtures.demo import demo_course

    course = demo_course(graded.course_dir.parent)
    where = ["--root", str(course.root), "--course-dir", str(course.folder)]
    assert main(["analysis", "all", *where]) == 0
    assert capsys.readouterr().out.count(" learner(s), ") == len(END_TO_END_CHAPTERS)
    expected, found = {}, {}
    for chapter in END_TO_END_CHAPTERS:
        for exercise in (e for e in all_exercises() if e.chapter == chapter and e.id in BUGS):
            module = importlib.import_module(f"tests.fixtures.mutants.{exercise.id[:4]}")
            mutant = getattr(module, BUGS[exercise.id])
            hint = hint_of(grade_function(exercise.id, mutant).message)
            expected[exercise.id, hint_id(hint)] = "1"
        sheet = course.analysis_csv(chapter).read_text(encoding="utf-8")
        found |= {(row["exercise"], row["hint_id"]): row["hint_count"]
                  for row in csv.DictReader(io.StringIO(sheet)) if row["hint_id"]}
        page = course.analysis_page(chapter).read_text(encoding="utf-8")
        picture = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
        assert picture and base64.b64decode(picture[1]).startswith(b"\x89PNG")
        text = page.replace(picture[0], "") + sheet
        assert not [name for name in END_TO_END if re.search(rf"\b{name}\b", text)], chapter
        assert all(exercise.difficulty in page for exercise in all_exercises()
                   if exercise.chapter == chapter)
    assert found == expected
    assert main(["analysis", "ch02", "--names", *where]) == 0
    assert re.search(r"\(dev\)", course.analysis_page("ch02_attention").read_text())
    assert main(["analysis", "ch09", *where]) == 1
    assert "no graded submission of ch09_training" in capsys.readouterr().err
