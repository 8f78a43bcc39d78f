"""Jupyter Server settings of learner mode (`make lab`), read from JUPYTER_CONFIG_PATH.

The other settings of this mode are in ``labconfig/page_config.json`` (which JupyterLab
plugins load) and ``nbgrader_config.py``; README.md in the folder above explains the layers.
"""

import os

c = get_config()  # noqa: F821 (Jupyter provides get_config when it reads this file)

# Containers and cloud notebook machines often run as root, which Jupyter refuses unless told.
c.ServerApp.allow_root = hasattr(os, "geteuid") and os.geteuid() == 0

# notebooks/conftest.py only lets `pytest notebooks/<chapter>` check a chapter: keep the file
# browser to the chapters.
c.ContentsManager.hide_globs.extend(["conftest.py"])

# nbgrader: learners validate their notebooks. The Assignment List needs an exchange (the
# ../exchange layer turns it on); the instructors' tools are off (../instructor turns them on).
c.ServerApp.jpserver_extensions.update({
    "nbgrader.server_extensions.validate_assignment": True,
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False,
    "nbgrader.server_extensions.formgrader": False,
})

# No news feed: the course pins its versions and may run offline (the announcements plugin,
# which asks about news on the first start, is off in labconfig/page_config.json).
c.LabApp.news_url = None

# Kernels that support it (IPython's does) talk to the server over encrypted ZeroMQ, instead
# of plain TCP and a warning in the log for every kernel.
c.KernelManager.transport_encryption = "auto"

# On the class server, each kernel in a cgroup of its own inside the learner's, so that a kernel
# past the memory cap is killed alone (autograder/learner/kernel_limits.py).
if os.environ.get("TRANSFORMER_COURSE_CGROUP"):
    c.KernelProvisionerFactory.default_provisioner_name = "course-limited"
