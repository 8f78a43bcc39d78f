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
# Chapter 10 reads Multi30k from data/multi30k here, or from MULTI30K_DIR: make lab
# MULTI30K_DIR=DIR (or MULTI30K_DIR=DIR make lab). A relative DIR is taken from this folder, not
# from the chapter folders the kernels run in.
MULTI30K_DIR ?=
MULTI30K_ABS = $(if $(filter /%,$(firstword $(MULTI30K_DIR))),$(MULTI30K_DIR),$(CURDIR)/$(MULTI30K_DIR))
MULTI30K_ENV = $(if $(MULTI30K_DIR), MULTI30K_DIR="$(MULTI30K_ABS)")
JUPYTER_ENV = JUPYTER_CONFIG_DIR="$(CURDIR)/build/jupyter" TRANSFORMER_COURSE_EXCHANGE="$(EXCHANGE)"$(MULTI30K_ENV)

# The class server (make hub, see autograder/hub/): where it answers and where it keeps its state.
HUB_URL ?= http://127.0.0.1:8000
HUB_STATE ?= build/hub
PROXY := build/proxy/node_modules/.bin/configurable-http-proxy
HUB_CONFIG := autograder/hub/jupyterhub_config.py

.PHONY: install lab instructor hub proxy test lint browser release demo clean

install: $(STAMP)

# pip compiles every module at install (a third of its time), and that is kept on purpose: the
# sandboxed kernels and learner processes cannot write bytecode into the environment, so without
# it each would compile what it imports (PyTorch's modules among them) at every start.
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

# A JupyterHub for a class on this machine, run as root (learners' servers run as their own
# accounts). Add people first: .venv/bin/python -m autograder hub add NAME [--instructor]
hub: $(STAMP) $(PROXY)
	@$(NODE_CHECK)
	@echo "Class server for $(HUB_STATE): $(HUB_URL)/hub/login (Ctrl-C stops it)"
	TRANSFORMER_HUB_STATE="$(HUB_STATE)" $(BIN)/jupyterhub -f $(HUB_CONFIG) --JupyterHub.bind_url=$(HUB_URL)

# JupyterHub's proxy, from npm at the version locked in autograder/hub/, into build/proxy/.
# Every package of that lock runs on Node.js $(NODE_MAJOR) (Debian 13's) or newer
# (tests/test_hub_roster.py checks the lock); `make hub` checks the Node.js it finds.
NODE_MAJOR := 20
NODE_CHECK = node -e 'const major = Number(process.versions.node.split(".")[0]); \
	if (major < $(NODE_MAJOR)) { console.error("make hub: the proxy needs Node.js $(NODE_MAJOR) or " \
	+ "newer, and this machine has " + process.version + ". Install a newer nodejs (Debian 13: " \
	+ "sudo apt-get install nodejs npm), then run make hub again."); process.exit(1); }'
PROXY_INSTALL = mkdir -p build/proxy \
	&& cp autograder/hub/package.json autograder/hub/package-lock.json build/proxy/ \
	&& cd build/proxy && npm ci --no-audit --no-fund && touch node_modules/.bin/configurable-http-proxy

$(PROXY): autograder/hub/package.json autograder/hub/package-lock.json
	@if ! command -v npm >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && apt-get install -y -qq nodejs npm; \
		else \
			echo "make hub needs Node.js $(NODE_MAJOR) or newer and npm: sudo apt-get install nodejs npm"; \
			exit 1; \
		fi; \
	fi
	@$(NODE_CHECK)
	$(PROXY_INSTALL)

# The class-server test (tests/test_hub.py) needs the proxy: install it where npm is, otherwise
# say so and go on (that test then skips with the same advice; in CI, CI=true, it fails).
proxy:
	@if [ $(PROXY) -nt autograder/hub/package-lock.json ]; then :; \
	elif command -v npm >/dev/null; then \
		$(PROXY_INSTALL) || echo "notice: installing the proxy with npm failed; the hub test will skip"; \
	else \
		echo "notice: npm is missing, so the hub test will skip. Run: sudo apt-get install nodejs npm"; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .

# --dist loadfile: each test file runs on one worker, which builds its module fixtures (a graded
# class, a server) once; with the default (--dist load) a file's tests were spread over both
# workers and each built its own. --dist loadgroup would be finer, but with pytest 9.2 it
# silently groups nothing (pytest-dev/pytest-xdist#1386).
# --no-loadscope-reorder: files go out in the order tests/conftest.py gives them (slow files
# first); xdist's own order, most tests first, left the slowest files, which hold few tests,
# to the end.
test: lint browser proxy
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder

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

# Instructors: release, grade a sample class end to end with 2 workers, print the grades. The
# sample class is a test fixture (tests/fixtures/), not part of the installed course.
demo: $(STAMP)
	$(BIN)/python -m tests.fixtures.demo --jobs 2 --out build/demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
