"""Who may log in to the class server: the people on the roster, with their own password, or
a class's people from its LMS (LTI 1.3, :mod:`autograder.hub.lti_login`).

The instructor adds people with ``python -m autograder hub add NAME ...``, which prints a
password for each (see :mod:`autograder.hub.classroom`). The hub reads the roster and the
password hashes at every login, so people added or removed while it runs count at once;
instructors are the hub's admins, teaching assistants and learners are not. A class with LTI
settings (``python -m autograder hub lti ...``, :mod:`autograder.hub.lti`) logs in from its LMS
instead: :func:`configure_login` chooses.
"""

from __future__ import annotations

from jupyterhub.auth import Authenticator

from autograder.hub.classroom import Classroom
from autograder.hub.lti import lti_file, read_lti
from autograder.hub.lti_login import configure_lti


class RosterAuthenticator(Authenticator):
    """JupyterHub's login form, checked against the class's roster and password hashes."""

    async def authenticate(self, handler, data: dict) -> dict | None:
        classroom = Classroom.from_env()
        name = self.normalize_username(data.get("username", ""))
        role = classroom.role_of(name)
        if role is None or not classroom.check_password(name, data.get("password", "")):
            return None
        return {"name": name, "admin": role == "instructor"}

    def check_allowed(self, username: str, authentication: dict | None = None) -> bool:
        return Classroom.from_env().role_of(username) is not None


def configure_login(config, classroom: Classroom) -> str:
    """Set how people log in to the class's hub in ``config`` (JupyterHub's traitlets Config):
    from the LMS when the class has LTI settings, else with the roster's passwords. Returns a
    line that says which.

    Raises:
        SystemExit: a password class without an instructor (nobody could run it).
        ValueError: the LTI settings are incomplete or unknown.
    """
    instructors = classroom.roster("instructor")
    config.Authenticator.admin_users = set(instructors)
    settings = read_lti(classroom.state)
    if settings is not None:
        configure_lti(config, settings)
        return (f"people log in from the LMS {settings.issuer} (LTI 1.3; the settings are in "
                f"{lti_file(classroom.state)}), their roles from the launch")
    if not instructors:
        raise SystemExit(f"The class in {classroom.state} has no instructor yet: add one with "
                         "`.venv/bin/python -m autograder hub add NAME --instructor`, then "
                         "start the hub again.")
    config.JupyterHub.authenticator_class = RosterAuthenticator
    # The roster as it is now; RosterAuthenticator reads it again at every login.
    config.Authenticator.allowed_users = set(classroom.roster("learner")) | set(classroom.staff())
    return "people log in with the passwords of the roster (hub add NAME prints them)"
