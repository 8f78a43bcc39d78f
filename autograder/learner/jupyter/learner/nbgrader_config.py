"""nbgrader settings of learner mode: the course id, under which an exchange lists chapters.

nbgrader's JupyterLab extensions read this file from JUPYTER_CONFIG_PATH (README.md in the
folder above); where the exchange is, is the exchange layer's business.
"""

from autograder.course import COURSE_ID

c = get_config()  # noqa: F821 (nbgrader provides get_config when it reads this file)
c.CourseDirectory.course_id = COURSE_ID
