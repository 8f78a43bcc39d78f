"""Each exercise's allow-list: what its learner process may use, and proof that nothing in
that process contains, builds or calls the reference of an exercise graded there."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import shutil
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from autograder.course import ROOT, Course
from autograder.exercises.reach import answer_modules
from autograder.exercises.registry import CHAPTERS, Exercise, all_exercises, get_exercise
from autograder.grade.verify import (
    allowed_modules,
    course_folder,
    learner_cells,
    plan,
    process_spec,
    reference_module,
    setup_bindings,
    substitutes,
)
from autograder.sandbox.client import LearnerProcess
from autograder.sandbox.launcher import Learner, Limits, learner_job

# Learner code that walks everything its process can reach, as an attacker would: every object
# the garbage collector tracks, every loaded module's globals, closures, class dictionaries,
# MROs and subclasses, and the folders on sys.path. It returns what it found as plain values.
WALKER = '''
def walk_everything():
    import gc, os, sys, types
    seen, codes, names, todo = set(), [], set(), list(gc.get_objects())
    todo += list(sys.modules.values())
    def add(value):
        if id(value) not in seen:
            seen.add(id(value))
            todo.append(value)
    while todo:
        value = todo.pop()
        if isinstance(value, types.CodeType):
            codes.append([value.co_filename, value.co_qualname,
                          [value.co_code.hex(), list(value.co_names), list(value.co_varnames)]])
            for const in value.co_consts:
                add(const)
        elif isinstance(value, types.FunctionType):
            add(value.__code__)
            for cell in value.__closure__ or ():
                try:
                    add(cell.cell_contents)
                except ValueError:
                    pass
            names.add(f"{value.__module__}.{value.__qualname__}")
        elif isinstance(value, type):
            names.add(f"{value.__module__}.{value.__qualname__}")
            for item in list(vars(value).values()) + list(value.__mro__):
                add(item)
            try:
                for sub in type.__subclasses__(value):
                    add(sub)
            except TypeError:
                pass
        elif isinstance(value, (staticmethod, classmethod, property)):
            for item in (getattr(value, "__func__", None), getattr(value, "fget", None)):
                if item is not None:
                    add(item)
        elif isinstance(value, types.ModuleType):
            names.add(value.__name__)
            for item in list(vars(value).values()):
                add(item)
    files = []
    for folder in sys.path:
        for root, _, found in os.walk(folder):
            files += [os.path.join(root, f) for f in found if f.endswith(".py")]
    return {"codes": codes, "names": sorted(names), "files": files,
            "modules": sorted(sys.modules)}
'''


def _exercises(chapter: str) -> list[Exercise]:
    return [e for e in all_exercises() if e.chapter == chapter]


def _source(chapter: str):
    return nbformat.read(Course.of(ROOT).source_notebook(chapter), as_version=4)


@pytest.mark.parametrize("exercise", all_exercises(), ids=lambda e: e.id)
def test_allowed_blocks_exist_and_the_setup_cell_gives_them(exercise: Exercise):
    _, bindings = setup_bindings(_source(exercise.chapter), [exercise])
    bound = set()
    for _, *where in bindings:
        if isinstance(where[0], dict):
            bound |= {f"{m}:{a}" for m, a in where[0].values()}
        else:
            bound |= {where[0], f"{where[0]}:{where[1]}"}
    # The references of other exercises of the chapter that the grader puts in place of the
    # learner's own definitions (verify.substitutes) need no setup.
    bound |= {f"{module}:{attribute}" for _, module, attribute in substitutes([exercise])}
    for entry in exercise.allowed:
        module, _, attribute = entry.partition(":")
        value = importlib.import_module(module)
        assert not attribute or hasattr(value, attribute), entry
        assert entry in bound, f"{entry} is allowed, but the chapter's setup cell never gives it"
    for builder in exercise.builders:
        module, _, attribute = builder.partition(":")
        assert callable(getattr(importlib.import_module(module), attribute)), builder


@pytest.mark.parametrize("exercise", all_exercises(), ids=lambda e: e.id)
def test_no_allowed_block_imports_the_exercises_reference(exercise: Exercise):
    modules = allowed_modules([exercise])
    assert reference_module(exercise) not in modules
    # Nor the course's answer in another form (a PyTorch module that computes it).
    assert not modules & set(answer_modules(exercise)), exercise.answered_by
    for group in plan(_exercises(exercise.chapter)):
        if exercise in group:
            assert not allowed_modules(group) & {reference_module(e) for e in group}


def _reference_codes(exercise: Exercise) -> Iterator[tuple[str, str]]:
    """``(file, signature)`` of the reference's code (its functions, or its class's methods):
    bytecode, names and variable names, what a clone of the code keeps."""
    reference = inspect.unwrap(exercise.load_reference())
    todo = [reference]
    if isinstance(reference, type):
        todo = [inspect.unwrap(getattr(v, "__func__", v)) for v in vars(reference).values()]
    for function in todo:
        code = getattr(function, "__code__", None)
        if code is not None:
            yield code.co_filename, repr([code.co_code.hex(), list(code.co_names),
                                          list(code.co_varnames)])


def _walk(exercises: list[Exercise], source, extra_cells=()) -> dict:
    """What the walker finds in the learner process that verifies ``exercises``."""
    spec, modules = process_spec(exercises, learner_cells(source), source)
    spec["cells"] = [*spec["cells"], *extra_cells, {"name": "walker", "source": WALKER}]
    spec["exercise_names"] = ["walk_everything"]
    folder = course_folder(modules)
    try:
        with Learner(Limits(cell_timeout_s=120)) as learner, \
                learner_job(learner, None, spec, course=folder) as job:
            process = LearnerProcess(job.command("learner", learner), job.path / "worker.log",
                                     env=job.env, call_timeout_s=120)
            try:
                return process.proxy("walk_everything")()
            finally:
                process.close()
    finally:
        shutil.rmtree(folder)


def _leaks(exercise: Exercise, found: dict) -> list[tuple[str, str]]:
    """Code of the exercise's reference that the walk found: from the reference's own file, or
    cloned anywhere but the learner's own cells (a learner may write the same few lines)."""
    reference = set(_reference_codes(exercise))
    # The same file wherever it lies (the learner's process sees the course elsewhere).
    files = tuple("/" + "/".join(Path(file).parts[-2:]) for file, _ in reference)
    signatures = {signature for _, signature in reference}
    return [(file, name) for file, name, code in found["codes"]
            if file.endswith(files) or (repr(code) in signatures
                                        and not file.startswith("<cell "))]


@pytest.mark.parametrize("chapter", list(CHAPTERS.values()))
def test_nothing_reachable_in_a_learner_process_is_its_exercises_reference(chapter):
    source = _source(chapter)
    for group in plan(_exercises(chapter)):
        found = _walk(group, source)
        for exercise in group:
            module = reference_module(exercise)
            assert module not in found["modules"], (exercise.id, module)
            assert not [n for n in found["names"] if n.startswith(f"{module}.")], exercise.id
            assert not [f for f in found["files"]
                        if f.endswith("/" + module.replace(".", "/") + ".py")], exercise.id
            assert not _leaks(exercise, found), exercise.id
        # What the process may use is there: the walk is not blind. (A module that a building
        # block imports only when called, as the encoder stack its default layer, is a file.)
        for module in allowed_modules(group):
            file = "/" + module.replace(".", "/") + ".py"
            assert module in found["modules"] or any(f.endswith(file) for f in found["files"]), \
                module


def test_the_walk_finds_a_reference_that_is_there():
    """The walk's own control: allow an exercise its reference, import it, and it is found."""
    exercise = get_exercise("ch03.attention_head")
    leaky = dataclasses.replace(exercise, allowed=(*exercise.allowed, exercise.reference))
    sneak = {"name": "sneak", "source": "import transformer_ref.numpy.attention_head as sneaky"}
    found = _walk([leaky], _source(exercise.chapter), [sneak])
    assert reference_module(exercise) in found["modules"]
    assert _leaks(exercise, found)
