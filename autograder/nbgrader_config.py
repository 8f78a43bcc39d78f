"""nbgrader configuration of the course; nbgrader reads it when it runs from this folder.

    cd autograder
    nbgrader generate_assignment ch01_positional_encoding --force   # solutions/ -> notebooks/
    nbgrader autograde ch01_positional_encoding       # course/submitted/ -> course/autograded/
    nbgrader generate_feedback ch01_positional_encoding              # -> course/feedback/
    nbgrader export                                   # -> course/grades.csv, with flags

The settings live in autograder/course.py (course_config), which the release command and the
tests use too, so that there is one place to change them. They route autograde, feedback,
export and collect through the course's own steps (autograder/nbgrader_hooks/commands.py), so
that these commands grade, and write, exactly what `python -m autograder` does.
"""

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("autograder") is None:
    # The course is not installed into this Python: import it from the checkout.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.course import ROOT, course_config, ready_alembic  # noqa: E402

ready_alembic()  # plain `nbgrader` finds alembic without activating .venv

c = get_config()  # noqa: F821 (nbgrader provides get_config when it reads this file)
c.merge(course_config(ROOT))
