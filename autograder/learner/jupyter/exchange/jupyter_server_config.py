"""Jupyter Server settings of a class with an nbgrader exchange: the Assignment List, where
learners fetch chapters, submit them and fetch their feedback. Read before ../learner from
JUPYTER_CONFIG_PATH (README.md in the folder above)."""

c = get_config()  # noqa: F821 (Jupyter provides get_config when it reads this file)

c.ServerApp.jpserver_extensions.update({"nbgrader.server_extensions.assignment_list": True})
