# Two commands do everything: `make lab` and `make test`.
# The first run of either creates .venv and installs the course; later runs reuse it
# and reinstall only when pyproject.toml changed (the stamp file is older than it).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Both cores by default; `make test JOBS=1` runs the suite serially.
JOBS ?= 2

# JupyterLab reads the course's configuration layers (autograder/learner/jupyter/, see its
# README.md) before any other and keeps its own state (settings, workspaces) in build/jupyter/:
# the user's ~/.jupyter plays no part, so the course looks the same on every machine.
LAYERS := $(CURDIR)/autograder/learner/jupyter
# A class's nbgrader exchange adds the Assignment List: make lab EXCHANGE=/srv/nbgrader/exchange
EXCHANGE ?=
LEARNER = $(if $(EXCHANGE),$(LAYERS)/exchange:)$(LAYERS)/learner
INSTRUCTOR = $(LAYERS)/instructor:$(LEARNER)
JUPYTER_ENV = JUPYTER_CONFIG_DIR="$(CURDIR)/build/jupyter" TRANSFORMER_COURSE_EXCHANGE="$(EXCHANGE)"

.PHONY: install lab instructor test lint browser release demo clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --editable '.[dev]'
	@touch $@

# Learner mode: the chapters, with nbgrader's Validate button (and Assignment List, see above).
lab: $(STAMP)
	$(JUPYTER_ENV) JUPYTER_CONFIG_PATH="$(LEARNER)" $(BIN)/jupyter lab --notebook-dir=notebooks

# Instructor mode: the whole repository, with formgrader, "Create assignment" and the course list.
instructor: $(STAMP)
	$(JUPYTER_ENV) JUPYTER_CONFIG_PATH="$(INSTRUCTOR)" $(BIN)/jupyter lab --notebook-dir=.

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint browser
	$(BIN)/python -m pytest -n $(JOBS)

# The browser tests (tests/test_browser.py) drive JupyterLab with Debian's Chromium, never a
# downloaded one. Install it where we can (root with apt-get); otherwise, or if the install
# fails, say so and go on: those tests then skip with the same advice (in CI, CI=true, they fail).
browser:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && apt-get install -y -qq chromium \
			|| echo "notice: installing chromium with apt-get failed; the browser tests will skip"; \
	else \
		echo "notice: /usr/bin/chromium is missing and only root with apt-get can install it;" \
			"the browser tests will skip. Run: sudo apt-get install chromium"; \
	fi

# Regenerate the learner notebooks (notebooks/) from the source notebooks (solutions/).
release: $(STAMP)
	$(BIN)/python -m autograder release

# Instructors: release, grade a sample class end to end with 2 workers, print the grades.
demo: $(STAMP)
	$(BIN)/python -m autograder demo --jobs 2 --out build/demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
