"""Check functions for the graded exercises, one module per chapter (``ch01.py`` ... ``ch12.py``).

How a chapter module registers an exercise
------------------------------------------
Each module decorates one check function per exercise with
:func:`autograder.exercises.registry.register`::

    from autograder.exercises.checking import CheckContext, Hint, call, compare, expect_tuple
    from autograder.exercises.registry import register

    @register(
        "ch02.softmax",                      # "<chapter prefix>.<function name>" (section 4 id)
        title="Numerically stable softmax",
        points=2,
        difficulty="easy",                   # "easy" | "medium" | "hard"
        minutes=10,                          # estimated time for a learner
        reference="transformer_ref.np_attention:softmax",   # "module:attribute", imported lazily
    )
    def check_softmax(ctx: CheckContext, fn) -> None:
        x = ctx.rng.standard_normal((2, 3, 5))            # fixed seed visible, secret seed hidden
        got = call(fn, x, axis=-1)                        # learner errors become CheckFailure
        compare(got, ctx.reference(x, axis=-1), "softmax(x, axis=-1)", hints=[
            Hint("rows do not sum to 1: softmax over the wrong axis?", ctx.reference(x, axis=0)),
        ])

The check function receives a :class:`autograder.exercises.checking.CheckContext` (``rng``,
``hidden``, ``reference``, ``exercise_id``) and the learner's callable. It returns ``None`` when
every check passes and raises :class:`autograder.exercises.checking.CheckFailure` with a
learner-facing message otherwise (``call``, ``compare``, ``expect_array``, ``expect_tuple``,
``expect_raises``, ``add_hint`` and ``fail`` do that for you; ``random_batch_shape`` and
``random_mask`` draw inputs). Attention-like exercises reuse ``attention_hints``,
``check_attention_result`` and ``call_with_mask`` from :mod:`autograder.exercises.checks.ch02`.
A check must not catch exceptions itself: the registry turns anything unexpected into a failed
result, so ``grade_function`` never raises because of learner code. Advice that costs no points
is a ``note`` (``compare`` adds one for a right result in another float dtype): the check
goes on and, if it passes, the learner reads the note under the success line.

``ctx.rng`` is seeded from the exercise id in visible mode (learners see stable messages) and
from ``AUTOGRADER_SECRET`` plus the exercise id in hidden mode; draw shapes from it too, so that
hidden inputs cannot be guessed. That seed is all the mode may change: a check never reads
``ctx.hidden``, so that every rule that costs points runs in the visible checks too
(``tests/exercises/test_hidden_only_rules.py``). Every rule must also be stated in the
exercise's text or docstring. Training-mode checks of modules with dropout use
:mod:`autograder.exercises.dropout_rules` (the paper's places, required and accepted).

An exercise whose solution calls the learner's own earlier function or class by its name
declares it: ``depends=("ch02.softmax",)``. When that earlier one fails its checks, the later
one is judged on its own merit by one of two rules, and the check's docstring says why:

* error carried forward (the default): against the reference's own code run with the
  learner's earlier function (:func:`autograder.exercises.registry.carried_reference`), for
  the NumPy functions of chapters 2 to 6;
* isolation (``isolated=True``): the learner's later code runs again with the course's earlier
  piece under its name (:func:`autograder.exercises.registry.isolated_check`), for modules
  built of the learner's earlier modules (chapters 7, 8 and 11). The course's piece must be on
  the exercise's ``allowed`` list: the grader's sandboxed process then swaps it in for the
  learner's (:func:`autograder.grade.verify.substitutes`). A notebook with the course installed
  does the same in its checks; a class's checking service cannot (its learners' views hold no
  answer of an open exercise), and says that grading will.

Either way one mistake costs points once, and a later answer wrong given a right earlier one
still fails (``tests/exercises/test_carried_forward.py``).

The chapter prefix ("ch02") selects the chapter id ("ch02_attention") through
:data:`autograder.exercises.registry.CHAPTERS`; the registry imports every ``chNN`` module of
this package the first time it is asked for an exercise.

Mutants (buggy and valid implementations that tests run through these checks) live in
:mod:`tests.fixtures.mutants`, whose docstring shows how a chapter lists them.
"""
