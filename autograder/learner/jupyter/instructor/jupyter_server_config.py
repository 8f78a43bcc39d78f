"""Jupyter Server settings of instructor mode (`make instructor`): learner mode plus formgrader
and the course list. Read before ../learner from JUPYTER_CONFIG_PATH, so these entries win."""

c = get_config()  # noqa: F821 (Jupyter provides get_config when it reads this file)

c.ServerApp.jpserver_extensions.update({
    "nbgrader.server_extensions.course_list": True,
    "nbgrader.server_extensions.formgrader": True,
})
