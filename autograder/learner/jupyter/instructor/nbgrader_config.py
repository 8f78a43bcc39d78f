"""nbgrader settings of instructor mode: the whole course (source, release, gradebook), as for
plain `nbgrader` commands run from autograder/ (see autograder/nbgrader_config.py)."""

from autograder.course import course_config, ensure_alembic_on_path

ensure_alembic_on_path()  # formgrader opens the gradebook, which runs `alembic`

c = get_config()  # noqa: F821 (nbgrader provides get_config when it reads this file)
c.merge(course_config())
