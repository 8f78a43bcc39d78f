"""Kernel managers whose kernels never see the grader's secret.

The grader's ``AUTOGRADER_SECRET`` draws the hidden checks' inputs; a kernel runs learner code,
which could print it. Sandboxed grading gives its kernels a derived value instead
(:func:`autograder.grade.learner.kernel_secret`); every other kernel the course starts leaves
the variable out:

* :class:`KernelWithoutSecret`, for nbclient: nbgrader's ``Execute`` (``nbgrader validate``,
  the Validate button; :func:`autograder.course.course_config` names it) and the learner's
  self-check (:mod:`autograder.learner.selfcheck`);
* :class:`ServerKernelWithoutSecret`, for Jupyter Server: the instructor mode's own kernels
  (``autograder/learner/jupyter/instructor/jupyter_server_config.py``).
"""

from __future__ import annotations

import os
from typing import Any

from jupyter_client.ioloop import AsyncIOLoopKernelManager
from jupyter_client.manager import AsyncKernelManager

from autograder.exercises.checking import SECRET_ENV, SECRET_FILE_ENV


def without_secret(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the grader's secret, or the name of the file that holds it."""
    return {key: value for key, value in env.items()
            if key not in (SECRET_ENV, SECRET_FILE_ENV)}


class _NoSecret:
    """Starts kernels with the environment they would get, less the grader's secret."""

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        kw["env"] = without_secret(kw.get("env", os.environ))
        return await super()._async_pre_start_kernel(**kw)  # type: ignore[misc]


class KernelWithoutSecret(_NoSecret, AsyncKernelManager):
    """nbclient's kernel manager, without the secret."""


class ServerKernelWithoutSecret(_NoSecret, AsyncIOLoopKernelManager):
    """Jupyter Server's kernel manager (``MappingKernelManager.kernel_manager_class``),
    without the secret."""
