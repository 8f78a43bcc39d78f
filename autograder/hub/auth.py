"""Who may log in to the class server: the people on the roster, with their own password.

The instructor adds people with ``python -m autograder hub add NAME ...``, which prints a
password for each (see :mod:`autograder.hub.classroom`). The hub reads the roster and the
password hashes at every login, so people added or removed while it runs count at once;
instructors are the hub's admins, teaching assistants and learners are not.
"""

from __future__ import annotations

from jupyterhub.auth import Authenticator

from autograder.hub.classroom import Classroom


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
