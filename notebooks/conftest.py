"""Lets ``pytest notebooks/<chapter>`` check a chapter notebook, one item per exercise.

The plugin lives in ``autograder/learner/pytest_plugin.py``; this file only switches it on for
this folder (unless ``-p autograder.learner.pytest_plugin`` has switched it on already).
"""

import autograder.learner.pytest_plugin as plugin


def pytest_collect_file(file_path, parent):
    if parent.config.pluginmanager.is_registered(plugin):
        return None
    return plugin.collect_notebook(file_path, parent)
