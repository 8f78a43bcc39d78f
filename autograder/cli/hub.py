"""``python -m autograder hub``: the class server's roster, its grading secret, the limits of
learners' servers and its login from the LMS (LTI 1.3)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The options of `hub lti`: the LMS's settings of the class (autograder.hub.lti.LtiSettings).
LTI_OPTIONS = (
    ("issuer", "the LMS's issuer (iss), e.g. https://canvas.instructure.com"),
    ("client-id", "the client id the LMS gave the tool"),
    ("authorize-url", "the LMS's OIDC authentication request URL"),
    ("jwks-url", "the LMS's public keys (JWKS URL)"),
    ("token-url", "the LMS's OAuth 2 token URL (for grade passback)"),
    ("deployment-id", "the tool's deployment id in the LMS"),
    ("username-key", "the launch claim that names users: email (default), sub or custom_NAME"),
)


def run(args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.hub.classroom import Classroom, delegated

    classroom = Classroom.from_env(args.state)
    if args.action == "secret":
        return _hub_secret(classroom, rotate=args.rotate)
    if args.action == "limits":
        return _hub_limits(classroom, args)
    if args.action == "lti":
        return _hub_lti(classroom, args)
    if args.action == "list":
        for role in ("instructor", "ta", "learner"):
            names = classroom.roster(role)
            print(f"{role}s ({len(names)}): {' '.join(names) or '-'}")
        return 0
    role = "instructor" if args.instructor else "ta" if args.ta else "learner"
    try:
        if delegated(classroom):
            # Not root: the class's grading service changes the roster, for instructors only.
            from autograder.hub.grading import ask

            lines = ask("roster", classroom=classroom, action=args.action, names=args.names,
                        role=role)
        else:
            lines = classroom.change_roster(args.action, args.names, role)
    except (ValueError, PermissionError, RuntimeError) as exc:
        print(f"hub {args.action} failed: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def add(subparsers: argparse._SubParsersAction) -> None:
    """Add ``hub add|password|remove|list|secret|limits|lti [NAME ...] [--instructor|--ta]
    [--rotate] [--memory-mb N] [--cpu-weight N] [--max-processes N] [--issuer URL ...]``."""
    parser = subparsers.add_parser(
        "hub", help="the roster, grading secret and limits of the class server (make hub)",
        description="add: put learners (or --instructor instructors) on the class server's "
                    "roster and print a password for each new one, --ta teaching assistants (each "
                    "gets a system account and home folder; needs root, or an instructor's "
                    "account while the hub runs). password: print a new "
                    "password. remove: take names off the roster (their files stay). list: "
                    "print the roster. secret: print where the class's grading secret is "
                    "(created if missing; --rotate writes a new one). limits: print what each "
                    "learner's server may use (memory, CPU weight, processes) and whether this "
                    "machine enforces it; with --memory-mb, --cpu-weight or --max-processes, set "
                    "them (servers get them at their next start). lti: print the class's LTI "
                    "1.3 settings and the URLs to register in the LMS; with --issuer, "
                    "--client-id, ... set them, and `make hub` logs people in from the LMS "
                    "instead of with passwords (restart it). The hub sees roster changes "
                    "at once.")
    parser.add_argument("action", choices=("add", "password", "remove", "list", "secret",
                                           "limits", "lti"))
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="user names: lower-case letters, digits, '-' and '_'; add also "
                             "takes NAME=EMAIL, NAME=LMS_ID or NAME=EMAIL,LMS_ID, the learner's "
                             "ids in the learning platform, which `export --format canvas|moodle` "
                             "writes")
    role = parser.add_mutually_exclusive_group()
    role.add_argument("--instructor", action="store_true",
                      help="add them as instructors (the hub's admins) instead of learners")
    role.add_argument("--ta", action="store_true",
                      help="add them as teaching assistants (they grade and write feedback; "
                           "they cannot change the roster or read the grading secret)")
    parser.add_argument("--rotate", action="store_true",
                        help="secret: replace the grading secret with a new random one")
    for limit, what in (("memory-mb", "memory cap of each learner's server, in MiB"),
                        ("cpu-weight", "CPU share of each learner's server, 1-10000 (100: equal)"),
                        ("max-processes", "processes and threads of each learner's server")):
        parser.add_argument(f"--{limit}", type=int, default=None, help=f"limits: the {what}")
    for setting, what in LTI_OPTIONS:
        parser.add_argument(f"--{setting}", default=None, help=f"lti: {what}")
    parser.add_argument("--state", type=Path, default=None,
                        help="the class's state folder (default: $TRANSFORMER_HUB_STATE, else "
                             "build/hub)")
    parser.set_defaults(handler=run)


def _hub_secret(classroom, rotate: bool) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.exercises.checking import SECRET_FILE_ENV

    try:
        path = classroom.ensure_secret(rotate=rotate)
    except PermissionError as exc:
        print(f"hub secret: {exc}", file=sys.stderr)
        return 1
    if rotate:
        print(f"wrote a new grading secret to {path}. Chapters graded from now on draw new "
              "hidden inputs (grade a chapter's whole class with one secret).")
    print(f"The class's grading secret is in {path} (root only). The hub's grading service "
          "grades with it for instructors and teaching assistants; from a root shell on this "
          "machine, grade with\n"
          f"  sudo {SECRET_FILE_ENV}={path} .venv/bin/python -m autograder autograde ...")
    return 0


def _hub_limits(classroom, args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.hub.limits import limits_file, limits_report, read_limits, write_limits

    changes = {name: value for name in ("memory_mb", "cpu_weight", "max_processes")
               if (value := getattr(args, name)) is not None}
    try:
        limits = (write_limits(classroom.state, **changes) if changes
                  else read_limits(classroom.state))
    except (ValueError, OSError) as exc:
        print(f"hub limits: {exc}", file=sys.stderr)
        return 1
    if changes:
        print(f"wrote {limits_file(classroom.state)}; learners' servers get these limits at "
              "their next start")
    for line in limits_report(limits):
        print(line)
    return 0


def _hub_lti(classroom, args: argparse.Namespace) -> int:
    # Loaded when this subcommand runs: each pays only for its own imports.
    from autograder.hub.lti import lti_file, read_lti, write_lti

    changes = {name.replace("-", "_"): value for name, _ in LTI_OPTIONS
               if (value := getattr(args, name.replace("-", "_"))) is not None}
    try:
        settings = (write_lti(classroom.state, **changes) if changes
                    else read_lti(classroom.state))
    except (ValueError, OSError) as exc:
        print(f"hub lti: {exc}", file=sys.stderr)
        return 1
    if settings is None:
        print("This class logs in with the password roster. To log in from the LMS, register "
              "the tool there (docs/class-server.md), then give its settings: hub lti "
              "--issuer URL --client-id ID --authorize-url URL --jwks-url URL --token-url URL "
              "--deployment-id ID")
        return 0
    if changes:
        print(f"wrote {lti_file(classroom.state)}; `make hub` logs people in from the LMS "
              "from its next start")
    for name, value in vars(settings).items():
        print(f"{name}: {value}")
    print("Register in the LMS (<hub> is the hub's public address, e.g. https://hub.example.edu):"
          "\n  login (OIDC initiation) URL: <hub>/hub/lti13/oauth_login"
          "\n  redirect (launch) URL:       <hub>/hub/lti13/oauth_callback"
          "\n  public keyset (JWKS) URL:    <hub>/hub/lti13/jwks"
          "\n  tool configuration (JSON):   <hub>/hub/lti13/config")
    return 0
