"""Grade passback to the LMS: LTI Assignment and Grade Services (AGS 2.0).

``python -m autograder lti-passback CHAPTER`` posts each learner's score of a chapter, as the
gradebook holds it, to the chapter's line item (the LMS's gradebook column):

1. a token from the platform's token URL, asked for with a client-credentials grant whose
   client assertion is a JWT signed with the tool's key (:func:`access_token`);
2. the line item: ``--lineitem URL`` when given, else the one of the course's line items
   container (recorded at launch) whose ``resourceId`` is the chapter, made when missing;
3. one score per learner who launched from the LMS (their LTI ``sub``, recorded at launch)
   to ``<lineitem>/scores``.

Learners who never launched from the LMS have no LTI id: they are listed, not sent.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import jwt

from autograder.grade.gradebook import Score
from autograder.hub.classroom import Classroom
from autograder.hub.lti import LtiSettings, key_id, read_launches, tool_key

AGS_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/"
SCOPES = (AGS_SCOPE + "lineitem", AGS_SCOPE + "score")
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
CONTAINER_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
ASSERTION_SECONDS = 300
HTTP_TIMEOUT_S = 30


def client_assertion(settings: LtiSettings, key, now: float | None = None) -> str:
    """The signed JWT with which the tool asks for a token (IMS Security Framework 4.1):
    issuer and subject the client id, audience the token URL, valid for five minutes."""
    now = int(time.time() if now is None else now)
    claims = {"iss": settings.client_id, "sub": settings.client_id, "aud": settings.token_url,
              "iat": now, "exp": now + ASSERTION_SECONDS, "jti": uuid.uuid4().hex}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": key_id(key)})


def _call(url: str, method: str = "GET", body: bytes | None = None,
          headers: dict[str, str] | None = None) -> object:
    """One request to the platform; its JSON answer (None when empty).

    Raises:
        RuntimeError: the platform answered with an error or could not be reached.
    """
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:
            text = answer.read().decode()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise RuntimeError(f"{method} {url}: the LMS answered {exc.code} {exc.reason}: "
                           f"{detail}") from exc
    except urllib.error.URLError as exc:
        raise RuntimeError(f"{method} {url}: the LMS cannot be reached: {exc.reason}") from exc
    return json.loads(text) if text.strip() else None


def access_token(settings: LtiSettings, key) -> str:
    """A bearer token for the line items and scores of the course (client-credentials grant)."""
    form = urllib.parse.urlencode({
        "grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE,
        "client_assertion": client_assertion(settings, key), "scope": " ".join(SCOPES)})
    answer = _call(settings.token_url, "POST", form.encode(),
                   {"Content-Type": "application/x-www-form-urlencoded"})
    return answer["access_token"]


def chapter_line_item(container: str, chapter: str, max_score: float, token: str) -> str:
    """The URL of the line item whose ``resourceId`` is ``chapter`` in the line items
    ``container``, made (label the chapter, ``scoreMaximum`` its points) when missing."""
    auth = {"Authorization": f"Bearer {token}"}
    query = urllib.parse.urlencode({"resource_id": chapter})
    found = _call(_with_path(container, "", query), headers={**auth, "Accept": CONTAINER_TYPE})
    if found:
        return found[0]["id"]
    item = {"scoreMaximum": max_score, "label": chapter, "resourceId": chapter}
    made = _call(container, "POST", json.dumps(item).encode(),
                 {**auth, "Content-Type": LINEITEM_TYPE, "Accept": LINEITEM_TYPE})
    return made["id"]


def _with_path(url: str, suffix: str, query: str = "") -> str:
    """``url`` with ``suffix`` added to its path and ``query`` to its query (AGS line item URLs
    may carry a query of their own: ``/scores`` goes before it)."""
    parts = urllib.parse.urlsplit(url)
    joined = "&".join(q for q in (parts.query, query) if q)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + suffix,
                                                  query=joined))


def score_payload(user_id: str, score: Score, when: datetime | None = None) -> dict:
    """The AGS score of one learner: the chapter's points so far out of all its points;
    ``gradingProgress`` is ``PendingManual`` while written answers wait for a grader."""
    when = when or datetime.now(UTC)
    return {"userId": user_id, "scoreGiven": score.score, "scoreMaximum": score.max_score,
            "activityProgress": "Completed",
            "gradingProgress": "PendingManual" if score.manual_pending else "FullyGraded",
            "timestamp": when.isoformat(timespec="milliseconds")}


def pass_back(classroom: Classroom, settings: LtiSettings, scores: Sequence[Score],
              lineitem: str | None = None) -> list[str]:
    """Post the ``scores`` of one chapter to the LMS; the lines that say what was sent.

    Raises:
        ValueError: nobody launched from the LMS with a line items URL, and no ``lineitem``.
        RuntimeError: the LMS refused a request or could not be reached.
    """
    if not scores:
        return ["no scores to send: grade the chapter first"]
    launches = read_launches(classroom)
    container = next((launch["lineitems"] for launch in launches.values()
                      if launch.get("lineitems")), None)
    if lineitem is None and container is None:
        raise ValueError("no launch from the LMS gave the course's line items URL (the AGS "
                         "claim): give the chapter's line item with --lineitem URL")
    key = tool_key(classroom)
    token = access_token(settings, key)
    chapter = scores[0].chapter
    lineitem = lineitem or chapter_line_item(container, chapter, scores[0].max_score, token)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": SCORE_TYPE}
    sent, missing = [], []
    for score in scores:
        launch = launches.get(score.student)
        if launch is None:
            missing.append(score.student)
            continue
        body = json.dumps(score_payload(launch["sub"], score)).encode()
        _call(_with_path(lineitem, "/scores"), "POST", body, headers)
        sent.append(score.student)
    lines = [f"sent {len(sent)} score(s) of {chapter} to {lineitem}"]
    if missing:
        lines.append(f"not sent, never launched from the LMS: {' '.join(missing)}")
    return lines
