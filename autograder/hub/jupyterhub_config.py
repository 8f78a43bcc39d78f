"""JupyterHub's configuration of the class server, read by `make hub`:

    jupyterhub -f autograder/hub/jupyterhub_config.py --JupyterHub.bind_url=http://127.0.0.1:8000

Accounts: the people on the class's roster log in at ``/hub/login`` with the password that
``python -m autograder hub add ...`` printed for them (autograder/hub/auth.py and
classroom.py); nobody else can. Instructors are the hub's admins; teaching assistants are not.
A class with LTI settings (``python -m autograder hub lti ...``) logs in from its LMS instead:
people arrive from a launch there, with the launch's role (autograder/hub/lti_login.py).

nbgrader is set up as its documentation for one class with one grader describes: one
exchange for everyone, the staff's servers (instructors' and teaching assistants') on the
course with the gradebook, learners' servers without the instructor tools (the course's Jupyter
configuration layers, see autograder/learner/jupyter/README.md).

Grading uses the class's own secret, kept in the state folder (``<state>/hub/autograder_secret``,
root only). Only the grading service reads it: the hub runs it as root, and the staff's servers,
which run as the staff's own accounts, ask it to grade (autograder/hub/grading.py).

The staff's servers serve the course in this repository, or in the copy that the
hub's ``TRANSFORMER_COURSE_ROOT`` names (a folder with solutions/ and notebooks/).

Everything the hub keeps is in the class's state folder (``$TRANSFORMER_HUB_STATE``, by default
build/hub/), so a restart finds the accounts, the exchange, the gradebook and everybody's files
as they were.
"""

import os
import sys

from autograder.course import COURSE_ROOT_ENV, ROOT
from autograder.exercises.checking import SECRET_FILE_ENV
from autograder.hub.auth import configure_login
from autograder.hub.classroom import PREFIX_ENV, Classroom
from autograder.hub.limits import limits_report, read_limits
from autograder.hub.spawner import ClassSpawner

if os.geteuid() != 0:
    raise SystemExit("The class server runs each learner's JupyterLab as the learner's own system "
                     "account, which needs root: run `sudo make hub`.")

# What the hub, its services and the servers make is their group's to share: the course folder
# is the staff group's (the grading service gives it to them, Classroom.share_with_staff).
os.umask(0o002)
classroom = Classroom.from_env()
classroom.prepare()
# The class's grading secret, made on the first start; only the grading service reads it.
classroom.ensure_secret()
# What each learner's server may use, and whether this machine enforces it: said at every start.
for line in limits_report(read_limits(classroom.state)):
    print(f"learners' servers: {line}", file=sys.stderr)

c = get_config()  # noqa: F821 (JupyterHub provides get_config when it reads this file)

# Only this machine by default; `make hub HUB_URL=...` (--JupyterHub.bind_url) says otherwise.
c.JupyterHub.bind_url = "http://127.0.0.1:8000"
c.JupyterHub.db_url = f"sqlite:///{classroom.hub_dir / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(classroom.hub_dir / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(classroom.hub_dir / "jupyterhub-proxy.pid")
# The proxy that `make hub` installs with npm (autograder/hub/package.json).
c.ConfigurableHTTPProxy.command = [
    str(ROOT / "build" / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy")]

# The roster's passwords, or the LMS when the class has LTI settings (autograder/hub/auth.py).
print(f"login: {configure_login(c, classroom)}", file=sys.stderr)

# Learners' visible checks run in this service, which also keeps the class's view of the course
# up to date with the chapters' due dates (autograder/hub/checking.py). JupyterHub starts it,
# and starts it again if it stops.
c.JupyterHub.services = [{
    "name": "checks",
    "command": [sys.executable, "-m", "autograder.hub.checking",
                "--listen", str(classroom.checks_socket), "--root", str(classroom.course.root),
                "--course-dir", str(classroom.course_dir), "--exchange", str(classroom.exchange)],
    "environment": {"PATH": os.environ.get("PATH", "")},
}, {
    # Grading and the other steps that need root, for the staff, whose servers are not root
    # (autograder/hub/grading.py). Only this service reads the class's secret.
    "name": "grading",
    "command": [sys.executable, "-m", "autograder.hub.grading", "--state", str(classroom.state)],
    "environment": {"PATH": os.environ.get("PATH", ""), PREFIX_ENV: classroom.prefix,
                    COURSE_ROOT_ENV: str(classroom.course.root),
                    SECRET_FILE_ENV: str(classroom.secret_file)},
}]

c.JupyterHub.spawner_class = ClassSpawner
c.Spawner.default_url = "/lab"
# A first start imports JupyterLab and nbgrader on a busy machine: give it time.
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
