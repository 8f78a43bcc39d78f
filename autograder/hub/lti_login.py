"""Logging in from the LMS (LTI 1.3) with JupyterHub's ltiauthenticator.

The platform starts a launch at ``/hub/lti13/oauth_login``; ltiauthenticator sends the browser
to the platform's authorize URL, which posts a signed ``id_token`` back to
``/hub/lti13/oauth_callback``. ltiauthenticator checks its signature (the platform's JWKS), its
audience (the client id), its issuer, its age and nonce; :class:`LaunchHandler` words each
refusal for the person who sees it. :class:`LtiAuthenticator` then takes the course role from
the launch's roles claim (Learner, Instructor, TeachingAssistant), puts a new person on the
roster with it and makes their system account, as ``hub add`` would, and records the launch for
grade passback (:mod:`autograder.hub.lti`). ``/hub/lti13/jwks`` serves the tool's public key,
and ``/hub/lti13/config`` ltiauthenticator's tool configuration (JSON, for Canvas).
"""

from __future__ import annotations

import json
import os

import jwt
from jupyterhub.handlers import BaseHandler
from jupyterhub.utils import url_path_join
from ltiauthenticator.lti13.auth import LTI13Authenticator
from ltiauthenticator.lti13.error import InvalidAudienceError, LoginError, TokenError
from ltiauthenticator.lti13.handlers import LTI13CallbackHandler
from traitlets import Unicode

from autograder.hub.classroom import Classroom
from autograder.hub.lti import (
    DEPLOYMENT_CLAIM,
    ROLES_CLAIM,
    LtiSettings,
    course_role,
    launch_name,
    public_jwks,
    record_launch,
    tool_key,
)


def refusal(error: Exception, tool: LTI13Authenticator) -> str:
    """What to tell the person whose launch ltiauthenticator refused with ``error``, for the
    class whose settings ``tool`` holds."""
    cause = error.__cause__ or error.__context__
    if isinstance(cause, jwt.ExpiredSignatureError):
        return ("The launch from the LMS has expired (its token is past its exp time): start "
                "it again from the LMS. If every launch expires, this server's clock is wrong.")
    if isinstance(cause, jwt.PyJWKClientConnectionError):
        return (f"The hub cannot read the LMS's keys at {tool.jwks_endpoint}, so it cannot check "
                "the launch: try again later; the instructor checks the JWKS URL (hub lti).")
    if isinstance(cause, jwt.InvalidSignatureError | jwt.PyJWKClientError):
        return ("The launch's signature does not match the LMS's keys at "
                f"{tool.jwks_endpoint}: it was not signed by the LMS this class is registered "
                "with. The instructor checks the JWKS URL and issuer (hub lti).")
    if isinstance(error, InvalidAudienceError) or isinstance(cause, jwt.InvalidAudienceError):
        client_ids = " ".join(sorted(tool.client_id))
        return ("The launch is meant for another tool: its audience is not this class's "
                f"client id {client_ids}. The instructor checks the client id (hub lti).")
    if isinstance(cause, jwt.InvalidIssuerError):
        return (f"The launch comes from another LMS than this class's ({tool.issuer}). "
                "The instructor checks the issuer (hub lti).")
    return f"The launch from the LMS was refused: {error}"


class LaunchHandler(LTI13CallbackHandler):
    """ltiauthenticator's launch (the platform's post of the ``id_token``), with refusals that
    say what went wrong in words (HTTP 401 for another audience, 400 for the rest)."""

    def decode_and_validate_launch_request(self) -> dict:
        try:
            return super().decode_and_validate_launch_request()
        except (TokenError, InvalidAudienceError) as exc:
            raise type(exc)(refusal(exc, self.authenticator)) from exc


class ToolJwksHandler(BaseHandler):
    """The tool's public key, as a JSON Web Key Set: the platform checks passback's token
    requests with it."""

    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(public_jwks(tool_key(Classroom.from_env()))))


class LtiAuthenticator(LTI13Authenticator):
    """Log in with an LTI 1.3 launch; the course role comes from the launch.

    A person the roster does not hold yet is added with the launch's role (learners,
    instructors, teaching assistants). Someone already on it in another role is refused with a
    message: the instructor changes a role with ``hub remove NAME``, and the next launch adds
    them with the new one. Instructors are the hub's admins.
    """

    callback_handler = LaunchHandler

    deployment_id = Unicode(
        config=True, help="The tool's deployment id in the platform; launches of other "
                          "deployments are refused.")

    def jwks_url(self, base_url: str) -> str:
        return url_path_join(base_url, "lti13", "jwks")

    def get_handlers(self, app) -> list:
        return [*super().get_handlers(app), (self.jwks_url(""), ToolJwksHandler)]

    async def authenticate(self, handler, data: dict | None = None) -> dict:
        """The user of a checked launch ``data`` (its decoded ``id_token``): ``{"name",
        "admin"}``, on the roster with their role from now on.

        Raises:
            LoginError: another deployment, no user, no course role, or another role on the
                roster (ltiauthenticator answers HTTP 400 with the message).
        """
        data = data or {}
        if data.get(DEPLOYMENT_CLAIM) != self.deployment_id:
            raise LoginError(f"The launch comes from deployment {data.get(DEPLOYMENT_CLAIM)!r} "
                             "of the tool in the LMS, not this class's: the instructor checks "
                             "the deployment id (hub lti).")
        if not data.get("sub"):
            raise LoginError("The launch names no user (it has no sub claim): open the tool from "
                             "your course in the LMS, logged in there.")
        role = course_role(data.get(ROLES_CLAIM) or [])
        if role is None:
            raise LoginError("The launch gives none of this course's roles (Learner, "
                             "Instructor, TeachingAssistant): ask the instructor to enrol you "
                             "in the course in the LMS.")
        classroom = Classroom.from_env()
        name = launch_name(classroom, data, self.username_key)
        other = classroom.role_of(name)
        if other not in (None, role):
            raise LoginError(f"{name} is on this class's roster as {other}, and the LMS "
                             f"launched them as {role}: an instructor changes the role with "
                             f"`python -m autograder hub remove {name}`, then launches again.")
        classroom.add([name], role)
        # The hub runs as root; the spawner makes the account anyway when a server starts.
        if os.geteuid() == 0:
            classroom.ensure_account(name, role)
        record_launch(classroom, name, data)
        return {"name": name, "admin": role == "instructor"}

    def check_allowed(self, username: str, authentication: dict | None = None) -> bool:
        return Classroom.from_env().role_of(username) is not None


def configure_lti(config, settings: LtiSettings) -> None:
    """Make ``config`` (JupyterHub's traitlets Config) log in through the LMS of ``settings``."""
    config.JupyterHub.authenticator_class = LtiAuthenticator
    config.LTI13Authenticator.issuer = settings.issuer
    config.LTI13Authenticator.client_id = {settings.client_id}
    config.LTI13Authenticator.authorize_url = settings.authorize_url
    config.LTI13Authenticator.jwks_endpoint = settings.jwks_url
    config.LTI13Authenticator.username_key = settings.username_key
    config.LtiAuthenticator.deployment_id = settings.deployment_id
    # Who may log in is the roster, which launches fill (check_allowed), not a list in the
    # configuration: JupyterHub's warning that nobody could log in does not apply.
    config.LtiAuthenticator.any_allow_config = True
