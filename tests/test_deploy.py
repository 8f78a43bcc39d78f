"""The Kubernetes configuration of autograder/deploy/: what can be checked without a cluster
(README.md there says what cannot)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[1] / "autograder" / "deploy"


def _merged(defaults: dict, ours: dict) -> dict:
    """``ours`` over ``defaults``, dictionaries merged key by key, as Helm merges values."""
    merged = dict(defaults)
    for key, value in ours.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


@pytest.fixture(scope="module")
def values() -> dict:
    """The course's values over the chart's defaults: what Helm checks against the schema."""
    defaults = yaml.safe_load((DEPLOY / "z2jh-4.4.0-default-values.yaml").read_text())
    values = _merged(defaults, yaml.safe_load((DEPLOY / "z2jh-values.yaml").read_text()))
    # README.md's helm command adds the file with --set-file ...nbgrader.stringData=...
    nbgrader = (DEPLOY / "nbgrader_config.py").read_text()
    values["singleuser"]["extraFiles"]["nbgrader"]["stringData"] = nbgrader
    return values


def test_helm_values_match_the_charts_schema(values: dict) -> None:
    schema = json.loads((DEPLOY / "z2jh-4.4.0-values.schema.json").read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(values)]
    assert errors == []


def test_the_schema_catches_a_misspelt_key(values: dict) -> None:
    """The schema is strict enough to matter: a typo in a key is an error."""
    schema = json.loads((DEPLOY / "z2jh-4.4.0-values.schema.json").read_text())
    wrong = {**values, "singleuser": {**values["singleuser"], "defaultURL": "/lab"}}
    assert list(jsonschema.validators.validator_for(schema)(schema).iter_errors(wrong))


def test_python_in_the_values_and_config_compiles(values: dict) -> None:
    for name, source in values["hub"]["extraConfig"].items():
        compile(source, f"hub.extraConfig.{name}", "exec")
    compile((DEPLOY / "nbgrader_config.py").read_text(), "nbgrader_config.py", "exec")


def test_dask_manifests_run_the_documented_commands() -> None:
    documents = list(yaml.safe_load_all((DEPLOY / "dask-grading.yaml").read_text()))
    assert all({"apiVersion", "kind", "metadata", "spec"} <= set(d) for d in documents)
    commands = {d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]["command"]
                for d in documents if d["kind"] == "Deployment"}
    assert commands["dask-scheduler"] == ["dask", "scheduler"]
    assert commands["dask-grader"][:3] == ["dask", "worker", "tcp://dask-scheduler:8786"]
    assert "--nthreads" in commands["dask-grader"]  # grading never shares a process's threads
    service = next(d for d in documents if d["kind"] == "Service")
    assert service["metadata"]["name"] == "dask-scheduler"
    assert service["spec"]["ports"][0]["port"] == 8786


def _stages(dockerfile: str) -> dict[str, list[str]]:
    """The instructions of each named stage of a Dockerfile."""
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in dockerfile.replace("\\\n", " ").splitlines():
        if line.startswith("FROM "):
            current = stages.setdefault(line.split()[-1], [])
        elif line.strip() and not line.startswith("#"):
            current.append(line.strip())
    return stages


def test_the_learner_image_holds_the_view_and_reaches_the_checking_service() -> None:
    stages = _stages((DEPLOY / "Dockerfile").read_text())
    copies = [line for line in stages["learner"] if line.startswith("COPY")]
    assert copies and all(" build/view/" in line for line in copies)  # the view and nothing else
    assert any(line.startswith("COPY . ") for line in stages["course"])
    documents = list(yaml.safe_load_all((DEPLOY / "checks-service.yaml").read_text()))
    service = next(d for d in documents if d["kind"] == "Service")
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    port = service["spec"]["ports"][0]["port"]
    env = next(line for line in stages["learner"] if line.startswith("ENV TRANSFORMER_CHECKS"))
    assert env.endswith(f"tcp://{service['metadata']['name']}:{port}")
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:3] == ["python", "-m", "autograder.hub.checking"]
    assert command[command.index("--listen") + 1] == f"tcp://0.0.0.0:{port}"
