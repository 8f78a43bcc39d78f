"""Jupyter Server settings of instructor mode (`make instructor`): learner mode plus the
course's formgrader and the course list. Read before ../learner from JUPYTER_CONFIG_PATH, so
these entries win."""

c = get_config()  # noqa: F821 (Jupyter provides get_config when it reads this file)

# The formgrader is the course's (autograder/nbgrader_hooks/formgrader: nbgrader's, with each
# submission's flags and offline formulas), which serves the routes nbgrader's would.
c.ServerApp.jpserver_extensions.update({
    "nbgrader.server_extensions.course_list": True,
    "nbgrader.server_extensions.formgrader": False,
    "autograder.nbgrader_hooks.formgrader": True,
    "jupyter_server_mathjax": True,
})

# The instructor's own kernels (a learner's notebook opened to look at it, say) never see the
# grader's secret, AUTOGRADER_SECRET, which this server's environment may hold.
c.MappingKernelManager.kernel_manager_class = "autograder.kernels.ServerKernelWithoutSecret"

# JupyterLab shows the Formgrader in a frame of its own page. JupyterHub's servers forbid every
# frame ("frame-ancestors 'none'") unless a server says otherwise: this one lets pages of its
# own origin (the hub's address) frame it, as Jupyter Server does on its own, and no others.
# (A plain value: JupyterHub's server extension reads this setting as a dict.)
c.ServerApp.tornado_settings = {"headers": {"Content-Security-Policy": "frame-ancestors 'self'"}}
