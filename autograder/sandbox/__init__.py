"""Running learner code in a sandbox.

:mod:`~autograder.sandbox.launcher` (the grader's side) prepares a private folder and a spec
and starts :mod:`~autograder.sandbox.worker` as a script in it; the two talk through the frames
of :mod:`~autograder.sandbox.wire`.
"""
