"""Whether the tests run in CI, where a missing browser, proxy or sandbox is an error."""

from __future__ import annotations

import os


def in_ci() -> bool:
    """True when CI=true (or 1/yes) is set, as `.ci/run` and hosted CI services do."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
