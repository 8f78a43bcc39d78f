"""nbgrader settings of learner mode: the course id, under which an exchange lists chapters.

nbgrader's JupyterLab extensions read this file from JUPYTER_CONFIG_PATH (README.md in the
folder above); where the exchange is, is the exchange layer's business.
"""

from autograder.course import COURSE_ID

c = get_config()  # noqa: F821 (nbgrader provides get_config when it reads this file)
c.CourseDirectory.course_id = COURSE_ID
# Validate runs the notebook and then waits for each cell's last output. nbgrader waits 4 s and
# then fails the whole Validate; on a class server under load (30 learners on 2 cores) 11 of 60
# Validates failed so, with no verdict (benchmarks/class_load.py).
c.Execute.iopub_timeout = 60
