"""Fixtures of the pipeline's tests."""

from __future__ import annotations

import nbformat
import pytest
from nbformat import NotebookNode

from autograder.course import ROOT, Course


@pytest.fixture(scope="module")
def source() -> NotebookNode:
    """The source notebook of ch02 (tests edit deep copies of it)."""
    return nbformat.read(Course.of(ROOT).source_notebook("ch02_attention"), as_version=4)
