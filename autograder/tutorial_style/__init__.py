"""The course's second working implementation: the PyTorch exercises (and two NumPy ones)
structured the way well-known tutorials structure them (:mod:`.implementations`), on two shared
parts (:mod:`.parts`).

It is the course's own code, like ``transformer_ref`` and the solution notebooks: copy detection
compares learners' answers with it (:data:`COPY_SOURCES`), it is never in a learner's kernel or
view, and the checks must judge it right (the tests grade it in both modes).
"""

# The modules whose definitions copy detection counts as the course's own code, beside
# transformer_ref and the solution notebooks.
COPY_SOURCES = ("autograder.tutorial_style.implementations",)
