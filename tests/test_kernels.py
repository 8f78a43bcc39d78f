"""Kernels the course starts outside the sandbox never see the grader's secret."""

from __future__ import annotations

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

from autograder.course import ROOT, course_config
from autograder.kernels import KernelWithoutSecret, ServerKernelWithoutSecret

SECRET = "the-graders-own-secret-7f3a"


def _secret_seen(manager: type) -> str:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os\nprint(os.environ.get('AUTOGRADER_SECRET'))")])
    NotebookClient(nb, kernel_manager_class=manager, timeout=60).execute()
    return nb.cells[0].outputs[0]["text"].strip()


@pytest.mark.parametrize("manager", [KernelWithoutSecret, ServerKernelWithoutSecret])
def test_kernel_managers_leave_the_secret_out(manager, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SECRET", SECRET)
    assert _secret_seen(AsyncKernelManager) == SECRET  # what a plain kernel would see
    assert _secret_seen(manager) == "None"


def test_nbgraders_kernels_are_the_secret_free_ones():
    assert course_config(ROOT).Execute.kernel_manager_class == (
        f"{KernelWithoutSecret.__module__}.{KernelWithoutSecret.__name__}")
