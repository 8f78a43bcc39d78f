"""The learner's configuration layer as nbgrader's own Validate reads it."""

from __future__ import annotations

from traitlets.config.loader import PyFileConfigLoader

from autograder.course import COURSE_ID, ROOT

LEARNER_LAYER = ROOT / "autograder" / "learner" / "jupyter" / "learner"


def test_validate_waits_for_output_on_a_busy_server():
    """nbgrader's Validate fails a notebook whose outputs are slow to arrive after 4 s by
    default; a learner's Validate waits a minute, as a busy class server needs."""
    from nbgrader.preprocessors import Execute
    from nbgrader.validator import Validator

    config = PyFileConfigLoader("nbgrader_config.py", str(LEARNER_LAYER)).load_config()
    assert config.CourseDirectory.course_id == COURSE_ID
    validator = Validator(config=config)
    execute = Execute(parent=validator, config=validator.config)
    assert execute.iopub_timeout >= 30
    assert execute.raise_on_iopub_timeout  # a verdict is still never made up
