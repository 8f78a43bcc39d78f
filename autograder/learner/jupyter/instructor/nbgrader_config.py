"""nbgrader settings of instructor mode: the whole course (source, release, gradebook), as for
plain `nbgrader` commands run from autograder/ (see autograder/nbgrader_config.py).

``TRANSFORMER_COURSE_DIR`` names another course folder (gradebook, submissions, feedback) than
the repository's autograder/course; the class server (autograder/hub) sets it to its own.
``TRANSFORMER_COURSE_ROOT`` names another course root (solutions/, notebooks/) than the
repository: the folder the server serves, which the class server sets too.
"""

import os

from autograder.course import COURSE_DIR_ENV, COURSE_ROOT_ENV, ROOT, course_config, ready_alembic

ready_alembic()  # the Formgrader creates and opens gradebooks with alembic

c = get_config()  # noqa: F821 (nbgrader provides get_config when it reads this file)
c.merge(course_config(root=os.environ.get(COURSE_ROOT_ENV) or ROOT,
                      course_dir=os.environ.get(COURSE_DIR_ENV) or None))

# An instructor works on every learner's files: nbgrader's "any student" (its default), never
# the instructor's own name, which the exchange layer gives a class server's users.
c.CourseDirectory.student_id = "*"
