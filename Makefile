# Two commands do everything: `make lab` and `make test`.
# The first run of either creates .venv and installs the course; later runs reuse it
# and reinstall only when pyproject.toml changed (the stamp file is older than it).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Both cores by default; `make test JOBS=1` runs the suite serially.
JOBS ?= 2

.PHONY: install lab test lint release demo clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --editable '.[dev]'
	@touch $@

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest -n $(JOBS)

# Regenerate the learner notebooks (notebooks/) from the source notebooks (solutions/).
release: $(STAMP)
	$(BIN)/python -m autograder release

# Instructors: release, grade a sample class end to end with 2 workers, print the grades.
demo: $(STAMP)
	$(BIN)/python -m autograder demo --jobs 2 --out build/demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
