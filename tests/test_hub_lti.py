"""Logging in from an LMS (LTI 1.3) and sending grades back to it (AGS), against a platform stub:
a local HTTP server with the platform's key set (JWKS), token URL and line items. Launches are
signed here with the platform's key, as the LMS signs them."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest.mock import Mock, patch

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine
from tornado.web import Application, HTTPError
from traitlets.config import Config

from autograder.cli import main
from autograder.grade import gradebook
from autograder.grade.gradebook import Score
from autograder.hub.auth import RosterAuthenticator, configure_login
from autograder.hub.classroom import Classroom
from autograder.hub.lti import (
    AGS_CLAIM,
    CLAIM,
    LtiSettings,
    course_role,
    key_id,
    public_jwks,
    read_launches,
    record_launch,
    tool_key,
    write_lti,
)
from autograder.hub.lti_login import LaunchHandler, LtiAuthenticator
from tests.test_hub_roster import classroom  # noqa: F401 (a fixture)

LIS = "http://purl.imsglobal.org/vocab/lis/v2/membership"
LEARNER, INSTRUCTOR = f"{LIS}#Learner", f"{LIS}#Instructor"
TEACHING_ASSISTANT = f"{LIS}/Instructor#TeachingAssistant"
CLIENT_ID, DEPLOYMENT = "10000000000042", "7:course-deployment"


class Platform(BaseHTTPRequestHandler):
    """The LMS's side: its keys, its token URL, the course's line items and their scores.
    What the tool sent is kept on the server (``server.scores``, ``server.line_items``)."""

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _authorized(self) -> bool:
        return self.headers.get("Authorization") == f"Bearer {self.server.token}"

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/jwks":
            return self._answer(200, self.server.platform_jwks)
        if url.path == "/lineitems" and self._authorized():
            wanted = urllib.parse.parse_qs(url.query).get("resource_id", [None])[0]
            return self._answer(200, [i for i in self.server.line_items
                                      if i["resourceId"] == wanted])
        return self._answer(401, {"error": "unauthorized"})

    def do_POST(self) -> None:
        if self.path == "/token":
            return self._token(urllib.parse.parse_qs(self._body().decode()))
        if not self._authorized():
            return self._answer(401, {"error": "unauthorized"})
        content_type, body = self.headers.get("Content-Type"), json.loads(self._body())
        if self.path == "/lineitems" and content_type.endswith("lineitem+json"):
            item = {**body, "id": f"{self.server.url}/lineitems/{len(self.server.line_items)}"}
            self.server.line_items.append(item)
            return self._answer(201, item)
        if self.path.endswith("/scores") and content_type.endswith("score+json"):
            self.server.scores.append((self.path, body))
            return self._answer(200, {})
        return self._answer(400, {"error": f"unexpected {self.path} {content_type}"})

    def _token(self, form: dict[str, list[str]]) -> None:
        """A token only for a client assertion signed with the tool's registered key."""
        field = {name: values[0] for name, values in form.items()}
        try:
            key = jwt.PyJWK(self.server.tool_jwks["keys"][0]).key
            claims = jwt.decode(field["client_assertion"], key, algorithms=["RS256"],
                                audience=f"{self.server.url}/token", issuer=CLIENT_ID)
            assert claims["sub"] == CLIENT_ID and claims["jti"]
            assert field["grant_type"] == "client_credentials"
            assert field["client_assertion_type"].endswith(":client-assertion-type:jwt-bearer")
            assert "https://purl.imsglobal.org/spec/lti-ags/scope/score" in field["scope"]
        except (jwt.PyJWTError, KeyError, AssertionError) as exc:
            return self._answer(400, {"error": "invalid_client", "detail": repr(exc)})
        self._answer(200, {"access_token": self.server.token, "token_type": "Bearer",
                           "expires_in": 3600})

    def log_message(self, *args) -> None:  # the test's output stays quiet
        pass


@pytest.fixture(scope="module")
def platform_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def platform(platform_key: rsa.RSAPrivateKey) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Platform)
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    server.platform_jwks = public_jwks(platform_key)
    server.token, server.tool_jwks, server.line_items, server.scores = "t0ken", {}, [], []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


@pytest.fixture
def room(request: pytest.FixtureRequest) -> Classroom:
    """An empty class of this test (test_hub_roster's fixture, which removes its accounts)."""
    return request.getfixturevalue("classroom")


@pytest.fixture
def settings(platform: ThreadingHTTPServer, room: Classroom) -> LtiSettings:
    """The class's LTI settings, as `hub lti` writes them, for the platform stub."""
    assert main(["hub", "lti", "--issuer", "https://lms.example.edu", "--client-id", CLIENT_ID,
                 "--authorize-url", f"{platform.url}/authorize", "--jwks-url",
                 f"{platform.url}/jwks", "--token-url", f"{platform.url}/token",
                 "--deployment-id", DEPLOYMENT]) == 0
    return write_lti(room.state)


def launch_claims(sub: str, email: str, roles: list[str], **changes: object) -> dict:
    """The claims of a resource link launch, as an LMS sends them, valid for five minutes."""
    now = int(time.time())
    claims = {
        "iss": "https://lms.example.edu", "aud": CLIENT_ID, "sub": sub, "iat": now,
        "exp": now + 300, "nonce": "n", "email": email,
        CLAIM + "message_type": "LtiResourceLinkRequest", CLAIM + "version": "1.3.0",
        CLAIM + "deployment_id": DEPLOYMENT, CLAIM + "roles": roles,
        CLAIM + "target_link_uri": "https://hub.example.edu/hub/",
        CLAIM + "resource_link": {"id": "chapters"},
        AGS_CLAIM: {"scope": ["https://purl.imsglobal.org/spec/lti-ags/scope/score"],
                    "lineitems": "https://lms.example.edu/api/lti/courses/7/line_items"},
    }
    return {**claims, **changes}


def sign(claims: dict, key: rsa.RSAPrivateKey) -> str:
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": key_id(key)})


def hub_handler(handler_class: type, authenticator: LtiAuthenticator, method: str, uri: str):
    """A handler of the hub for one request, in a stand-in of JupyterHub's application (as
    ltiauthenticator's own tests make them)."""
    application = Application(hub=Mock(base_url="/hub/", server=Mock(base_url="/hub/")),
                              cookie_secret=os.urandom(32), authenticator=authenticator, app=None,
                              db=Mock(rollback=Mock(return_value=None)))
    request = HTTPServerRequest(start_line=RequestStartLine(method, uri, "HTTP/1.1"),
                                connection=Mock(),
                                headers=HTTPHeaders({"Host": "hub.example.edu"}))
    return handler_class(application, request)


async def post_launch(id_token: str, settings: LtiSettings) -> dict:
    """Post ``id_token`` to the hub's launch handler as the platform's form post does (the
    state and nonce cookies, ltiauthenticator's own business, pass); the user it logs in."""
    config = Config()
    configure_login(config, Classroom.from_env())
    authenticator = LtiAuthenticator(config=config)
    query = urllib.parse.urlencode({"id_token": id_token, "state": "s"})
    handler = hub_handler(LaunchHandler, authenticator, "POST",
                          f"/hub/lti13/oauth_callback?{query}")
    logged_in = {}

    async def login_user(data: dict) -> Mock:
        logged_in.update(await authenticator.get_authenticated_user(handler, data))
        return Mock(name=logged_in["name"])

    with patch.object(handler, "check_state"), patch.object(handler, "check_nonce"), \
            patch.object(handler, "login_user", login_user), \
            patch.object(handler, "redirect_to_next_url"):
        await handler.post()
    return logged_in


def test_signed_launches_log_in_a_learner_and_an_instructor_with_their_roles(
        settings: LtiSettings, platform_key: rsa.RSAPrivateKey, room: Classroom) -> None:
    learner = sign(launch_claims("lms-user-1", "Alice.Smith@uni.example.edu", [LEARNER]),
                   platform_key)
    assert asyncio.run(post_launch(learner, settings))["name"] == "alice_smith"
    instructor = sign(launch_claims("lms-user-2", "carol@uni.example.edu",
                                    [INSTRUCTOR, f"{LIS}#Mentor"]), platform_key)
    user = asyncio.run(post_launch(instructor, settings))
    assert (user["name"], user["admin"]) == ("carol", True)
    assert room.roster("learner") == ["alice_smith"]
    assert room.roster("instructor") == ["carol"]
    if os.geteuid() == 0:  # the account, as `hub add` makes it
        assert room.home("alice_smith").stat().st_mode & 0o777 == 0o700
    # Each launch is kept for grade passback: the LTI user id and the course's line items.
    assert read_launches(room)["alice_smith"]["sub"] == "lms-user-1"
    assert read_launches(room)["alice_smith"]["lineitems"].endswith("/line_items")
    # The same LMS user comes back under the same name, whatever their email says now.
    again = sign(launch_claims("lms-user-1", "a.smith@uni.example.edu", [LEARNER]), platform_key)
    assert asyncio.run(post_launch(again, settings))["name"] == "alice_smith"
    # Another LMS user whose email gives the same name gets a name of their own.
    other = sign(launch_claims("lms-user-3", "alice.smith@elsewhere.example.org", [LEARNER]),
                 platform_key)
    assert asyncio.run(post_launch(other, settings))["name"].startswith("lti-")


@pytest.mark.parametrize(("changes", "signer", "status", "message"), [
    ({"exp": int(time.time()) - 60}, "platform", 400, "The launch from the LMS has expired"),
    ({"aud": "another-tool"}, "platform", 401, "meant for another tool"),
    ({}, "another", 400, "signature does not match the LMS's keys"),
    ({CLAIM + "deployment_id": "9:other"}, "platform", 400, "from deployment '9:other'"),
    ({CLAIM + "roles": [f"{LIS}#Mentor"]}, "platform", 400, "none of this course's roles"),
], ids=["expired", "wrong-audience", "bad-signature", "other-deployment", "no-course-role"])
def test_bad_launches_are_refused_with_a_message(
        settings: LtiSettings, platform_key: rsa.RSAPrivateKey, room: Classroom, changes: dict,
        signer: str, status: int, message: str) -> None:
    key = (platform_key if signer == "platform"
           else rsa.generate_private_key(public_exponent=65537, key_size=2048))
    claims = launch_claims("lms-user-9", "mallory@uni.example.edu", [LEARNER], **changes)
    # Another key under the platform's key id: only the signature gives it away.
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": key_id(platform_key)})
    with pytest.raises(HTTPError) as refused:
        asyncio.run(post_launch(token, settings))
    assert refused.value.status_code == status
    assert message in refused.value.log_message
    assert room.roster("learner") == []


def test_roles_of_a_launch() -> None:
    assert course_role([TEACHING_ASSISTANT, INSTRUCTOR]) == "ta"
    assert course_role([INSTRUCTOR]) == "instructor"
    assert course_role(["Learner"]) == course_role([LEARNER]) == "learner"
    # An institution role is not a role in the course.
    student = "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Student"
    assert course_role([student]) is None


def test_the_class_configuration_chooses_the_login(settings: LtiSettings,
                                                    room: Classroom) -> None:
    config = Config()
    assert "from the LMS" in configure_login(config, room)
    assert config.JupyterHub.authenticator_class is LtiAuthenticator
    assert config.LTI13Authenticator.client_id == {CLIENT_ID}
    assert config.LtiAuthenticator.deployment_id == DEPLOYMENT
    # The platform checks passback's token requests with the tool's key, served by the hub.
    authenticator = LtiAuthenticator(config=config)
    routes = dict(authenticator.get_handlers(None))
    assert {"lti13/oauth_login", "lti13/oauth_callback", "lti13/config"} <= set(routes)
    jwks = hub_handler(routes["lti13/jwks"], authenticator, "GET", "/hub/lti13/jwks")
    jwks.get()
    assert json.loads(b"".join(jwks._write_buffer)) == public_jwks(tool_key(room))
    # Without the LTI settings, the password roster (which needs an instructor).
    (room.state / "lti.json").unlink()
    with pytest.raises(SystemExit, match="no instructor yet"):
        configure_login(Config(), room)
    room.add(["carol"], "instructor")
    config = Config()
    assert "passwords" in configure_login(config, room)
    assert config.JupyterHub.authenticator_class is RosterAuthenticator


def test_lti_passback_posts_the_chapters_scores_to_its_line_item(
        settings: LtiSettings, platform: ThreadingHTTPServer, room: Classroom,
        monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    platform.tool_jwks = public_jwks(tool_key(room))  # the tool, registered in the LMS
    ags = {AGS_CLAIM: {"lineitems": f"{platform.url}/lineitems"}}
    for name, sub in (("alice", "lms-user-1"), ("bob", "lms-user-2")):
        record_launch(room, name, launch_claims(sub, f"{name}@uni.example.edu", [LEARNER], **ags))
    # The gradebook's scores (auto, auto max, by hand, by hand max, by hand still pending).
    scores = [Score("alice", "ch02_attention", 7, 8, 2, 2, 0),
              Score("alice", "ch03_attention_head", 1, 6, 0, 0, 0),
              Score("bob", "ch02_attention", 3, 8, 0, 2, 2),
              Score("dave", "ch02_attention", 8, 8, 2, 2, 0)]
    monkeypatch.setattr(gradebook, "read_scores", lambda course: scores)
    assert main(["lti-passback", "ch02"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"sent 2 score(s) of ch02_attention to {platform.url}/lineitems/0",
        "not sent, never launched from the LMS: dave"]
    assert platform.line_items == [{"scoreMaximum": 10.0, "label": "ch02_attention",
                                    "resourceId": "ch02_attention",
                                    "id": f"{platform.url}/lineitems/0"}]
    (path, alice), (_, bob) = platform.scores
    assert path == "/lineitems/0/scores"
    assert {k: alice[k] for k in alice if k != "timestamp"} == {
        "userId": "lms-user-1", "scoreGiven": 9.0, "scoreMaximum": 10.0,
        "activityProgress": "Completed", "gradingProgress": "FullyGraded"}
    assert abs(time.time() - datetime.fromisoformat(alice["timestamp"]).timestamp()) < 60
    assert (bob["userId"], bob["scoreGiven"], bob["gradingProgress"]) == (
        "lms-user-2", 3.0, "PendingManual")
    # Again: the chapter's line item is found, not made twice.
    assert main(["lti-passback", "ch02"]) == 0
    assert len(platform.line_items) == 1 and len(platform.scores) == 4
    # A token request signed with another key than the registered one is refused, and said.
    platform.tool_jwks = public_jwks(rsa.generate_private_key(public_exponent=65537,
                                                              key_size=2048))
    assert main(["lti-passback", "ch02"]) == 1
    assert re.search(r"the LMS answered 400 .*invalid_client", capsys.readouterr().err)


def test_lti_passback_needs_lti_settings(room: Classroom, capsys) -> None:
    assert main(["lti-passback", "ch02", "--state", str(room.state)]) == 1
    assert "does not log in from an LMS" in capsys.readouterr().err
    assert not Path(room.state / "lti.json").exists()
