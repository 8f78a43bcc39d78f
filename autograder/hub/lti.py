"""A class that logs in from its LMS (LTI 1.3): the platform's settings, the tool's key, the
course role of a launch and what each launch leaves behind for grade passback.

The class's LTI settings are in ``<state>/lti.json``; with that file, `make hub` logs people in
through the LMS (:mod:`autograder.hub.lti_login`) instead of the password roster::

    python -m autograder hub lti --issuer https://canvas.instructure.com \\
        --client-id 10000000000001 --deployment-id 1:abc \\
        --authorize-url https://sso.canvaslms.com/api/lti/authorize_redirect \\
        --jwks-url https://sso.canvaslms.com/api/lti/security/jwks \\
        --token-url https://sso.canvaslms.com/login/oauth2/token

The tool's own RSA key (``<state>/hub/lti_tool_key.pem``, root only) signs the token requests of
grade passback (:mod:`autograder.hub.lti_grades`); the platform checks them with its public
half, which the hub serves at ``/hub/lti13/jwks``. Each launch records the learner's LTI ``sub``
and the course's line items URL in ``<state>/hub/lti_launches.json``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from autograder.hub.classroom import NAME, Classroom
from autograder.hub.settings import read_settings

LTI_FILE = "lti.json"
LAUNCHES_FILE = "lti_launches.json"
TOOL_KEY_FILE = "lti_tool_key.pem"
TOOL_KEY_BITS = 2048
# Longer names would make system accounts past useradd's limit with a long prefix.
MAX_NAME = 20
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
ROLES_CLAIM = CLAIM + "roles"
DEPLOYMENT_CLAIM = CLAIM + "deployment_id"
CUSTOM_CLAIM = CLAIM + "custom"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
# The context roles of LIS v2 (the TeachingAssistant sub-role is ".../membership/Instructor#
# TeachingAssistant"). A teaching assistant is usually also sent as Instructor, so the course
# roles are tried from the least privileged staff role up, learners last.
LIS_MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
COURSE_ROLES = (("TeachingAssistant", "ta"), ("Instructor", "instructor"), ("Learner", "learner"))


@dataclass(frozen=True)
class LtiSettings:
    """How the class's LMS (the LTI 1.3 *platform*) knows this hub (the *tool*).

    Attributes:
        issuer: the platform's ``iss`` (Canvas: https://canvas.instructure.com; Moodle: its
            address).
        client_id: the id the platform gave the tool when it was registered.
        authorize_url: the platform's OIDC authentication request URL.
        jwks_url: the platform's public keys (JWKS), which check the launches' signatures.
        token_url: the platform's OAuth 2 token URL (grade passback asks it for a token).
        deployment_id: the deployment of the tool in the platform; other deployments are
            refused.
        username_key: the launch claim that names the user (``email``, ``sub``, or
            ``custom_NAME`` for a custom parameter); the name is made fit for the roster.
    """

    issuer: str
    client_id: str
    authorize_url: str
    jwks_url: str
    token_url: str
    deployment_id: str
    username_key: str = "email"

    def __post_init__(self) -> None:
        if missing := [f.name for f in fields(self) if not getattr(self, f.name)]:
            raise ValueError(f"the class's LTI settings lack {', '.join(missing)}: set them "
                             "with `python -m autograder hub lti --...`")


def lti_file(state: Path) -> Path:
    return state / LTI_FILE


def read_lti(state: Path) -> LtiSettings | None:
    """The class's LTI settings, or None: the class logs in with the password roster.

    Raises:
        ValueError: the file names an unknown setting or lacks one.
    """
    return read_settings(lti_file(state), LtiSettings, "LTI settings")


def write_lti(state: Path, **changes: str) -> LtiSettings:
    """Change the settings that ``changes`` name (the first time, all of them) and write them.

    Raises:
        ValueError: a setting would be missing.
    """
    old = read_lti(state)
    blank = {f.name: "" for f in fields(LtiSettings)} | {"username_key": "email"}
    settings = replace(old, **changes) if old is not None else LtiSettings(**(blank | changes))
    state.mkdir(parents=True, exist_ok=True)
    lti_file(state).write_text(json.dumps(asdict(settings), indent=1) + "\n")
    return settings


# ---- the tool's key

def tool_key(classroom: Classroom) -> rsa.RSAPrivateKey:
    """The tool's private key, made on first use (``<state>/hub/lti_tool_key.pem``, 0600)."""
    path = classroom.hub_dir / TOOL_KEY_FILE
    if not path.is_file():
        key = rsa.generate_private_key(public_exponent=65537, key_size=TOOL_KEY_BITS)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        _write_private(classroom, path, pem)
    return serialization.load_pem_private_key(path.read_bytes(), password=None)


def key_id(key: rsa.RSAPrivateKey | rsa.RSAPublicKey) -> str:
    """The ``kid`` of a key: a digest of its public half, so it changes with the key."""
    public = key.public_key() if isinstance(key, rsa.RSAPrivateKey) else key
    der = public.public_bytes(serialization.Encoding.DER,
                              serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()[:12]).decode()


def public_jwks(key: rsa.RSAPrivateKey) -> dict:
    """The JSON Web Key Set of ``key``'s public half: ``{"keys": [{kty, n, e, kid, alg, use}]}``."""
    jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {"keys": [{**jwk, "kid": key_id(key), "alg": "RS256", "use": "sig"}]}


# ---- what a launch says

def course_role(roles: list[str]) -> str | None:
    """The course role (``learner``, ``ta``, ``instructor``) of a launch's roles claim, or None.

    Full LIS context role URIs count, and the short names (``Learner``) that LTI 1.3 still
    allows for them; institution and system roles (``.../institution/person#Student``) do not.
    """
    names = {uri.rsplit("#", 1)[-1] for uri in roles
             if uri.startswith(LIS_MEMBERSHIP) or re.fullmatch(r"\w+", uri)}
    return next((role for lis, role in COURSE_ROLES if lis in names), None)


def launch_name(classroom: Classroom, id_token: dict, username_key: str) -> str:
    """The roster name of the launch's user: the one an earlier launch of the same issuer and
    ``sub`` gave, else the claim ``username_key`` (``custom_X``: the custom parameter X; an
    email: its local part) made a valid roster name. A value that cannot become one, a missing
    claim, and a name another LMS user already holds give ``lti-`` and a digest of the issuer
    and ``sub``."""
    person = (id_token.get("iss"), id_token.get("sub"))
    launches = read_launches(classroom)
    for name, launch in launches.items():
        if (launch["iss"], launch["sub"]) == person:
            return name
    claims, key = id_token, username_key
    if key.startswith("custom_"):
        claims, key = id_token.get(CUSTOM_CLAIM) or {}, key.removeprefix("custom_")
    value = str(claims.get(key) or "").split("@", 1)[0].lower()
    name = re.sub(r"[^a-z0-9_-]", "_", value)
    if NAME.fullmatch(name) and len(name) <= MAX_NAME and name not in launches:
        return name
    return f"lti-{hashlib.sha256(' '.join(map(str, person)).encode()).hexdigest()[:12]}"


def launches_file(classroom: Classroom) -> Path:
    return classroom.hub_dir / LAUNCHES_FILE


def read_launches(classroom: Classroom) -> dict[str, dict]:
    """What the last launch of each user left: ``{name: {"sub", "iss", "lineitems",
    "lineitem", "scope"}}`` (the AGS claim's URLs and scopes, None where it had none)."""
    path = launches_file(classroom)
    return json.loads(path.read_text()) if path.is_file() else {}


def record_launch(classroom: Classroom, name: str, id_token: dict) -> None:
    """Keep the LTI ``sub`` of ``name`` and the launch's line items, for grade passback."""
    ags = id_token.get(AGS_CLAIM) or {}
    launches = read_launches(classroom)
    launches[name] = {"sub": id_token.get("sub"), "iss": id_token.get("iss"),
                      "lineitems": ags.get("lineitems"), "lineitem": ags.get("lineitem"),
                      "scope": ags.get("scope", [])}
    _write_private(classroom, launches_file(classroom),
                   json.dumps(launches, indent=1, sort_keys=True).encode())


def _write_private(classroom: Classroom, path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` in the hub's root-only folder, whole or not at all."""
    classroom.prepare()
    fd, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")  # mode 0600
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(staging, path)
