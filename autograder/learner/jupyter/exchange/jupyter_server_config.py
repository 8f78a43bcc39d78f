"""Jupyter Server settings of a class with an nbgrader exchange: the Assignment List, where
learners fetch chapters, submit them and fetch their feedback. Read before ../learner from
JUPYTER_CONFIG_PATH (README.md in the folder above)."""

import os

c = get_config()  # noqa: F821 (Jupyter provides get_config when it reads this file)

c.ServerApp.jpserver_extensions.update({"nbgrader.server_extensions.assignment_list": True})

# The course's JupyterLab plugin beside this file: the Assignment List's "(view feedback)" opens
# the feedback page itself, and a refused submission reads as its sentence, without nbgrader's
# traceback (labextensions/@build-the-transformer/assignment-list).
c.LabApp.extra_labextensions_path = [
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "labextensions")]
