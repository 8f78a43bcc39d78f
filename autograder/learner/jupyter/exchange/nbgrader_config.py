"""nbgrader settings of a class with an exchange: where the exchange folder is, and where the
Assignment List puts the chapters a learner fetches.

``TRANSFORMER_COURSE_EXCHANGE`` (set by `make lab EXCHANGE=...`) names the exchange. Without
the variable, nbgrader's own configuration decides: ``c.Exchange.root`` in an
nbgrader_config.py further down the Jupyter configuration path (a class server's
/etc/jupyter, for example), else nbgrader's default, /srv/nbgrader/exchange.
"""

import os

c = get_config()  # noqa: F821 (nbgrader provides get_config when it reads this file)
if os.environ.get("TRANSFORMER_COURSE_EXCHANGE"):
    c.Exchange.root = os.environ["TRANSFORMER_COURSE_EXCHANGE"]

# Chapters are fetched into, and submitted from, Exchange.assignment_dir: by default ".", the
# server process's working folder, which need not be the folder Jupyter serves (`make lab`
# starts in the repository and serves notebooks/). nbgrader's Assignment List reads this file
# from inside the served folder, so this names that folder.
c.Exchange.assignment_dir = os.getcwd()

# Submit refuses a chapter whose answers are in the learner's view of a class already (their
# deadline has passed): autograder/learner/submit.py.
c.ExchangeFactory.submit = "autograder.learner.submit.CourseSubmit"

# On a class server the learner is the hub's user, whatever their system account is called
# (autograder/hub runs learners as jupyter-<name>): submissions and feedback go by that name.
if os.environ.get("JUPYTERHUB_USER"):
    c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
