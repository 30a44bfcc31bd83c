# servewise — the two commands of CONTRACTS §1. Both create .venv if missing and need no
# activated environment; run them as often as you like.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip -qq --disable-pip-version-check

.PHONY: expert-review run test test-slow test-fast lint rules-test bench bench-doc smoke clean

$(BIN)/python:
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	@$(PIP) install -e .
	@touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	@$(PIP) install -e '.[test]'
	@touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	@$(BIN)/servewise plan examples/chat-70b-online.yaml
	@echo "next: $(BIN)/servewise --help   (or: source $(BIN)/activate, then servewise plan YOUR.yaml)"

# `make test` (what CI runs first, about 5 minutes on 2 cores): ruff, the rule linter, the whole
# suite on two xdist workers (loadgroup keeps the tests sharing a per-process cache on one worker,
# see tests/conftest.py; the slow ones included) except the pseudo-terminal interviews, which run
# beside it in one process of their own (forkpty is not run from a multi-threaded xdist worker;
# they mostly wait for the interview, and fill the workers' idle end), their output shown after
# the suite's; then the wheel smoke test.
PYTEST_XDIST := -n 2 --dist loadgroup
PTY_TESTS    := tests/test_ask_pty.py

test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/servewise rules lint
	@pty_log=$$(mktemp); \
	$(BIN)/python -m pytest -p no:cacheprovider $(PTY_TESTS) > "$$pty_log" 2>&1 & pty_pid=$$!; \
	trap 'kill $$pty_pid 2>/dev/null; rm -f "$$pty_log"; exit 130' INT TERM; \
	echo "$(BIN)/python -m pytest $(PYTEST_XDIST) --ignore=$(PTY_TESTS)   (and $(PTY_TESTS) beside it)"; \
	$(BIN)/python -m pytest $(PYTEST_XDIST) --ignore=$(PTY_TESTS); suite=$$?; \
	wait $$pty_pid; pty=$$?; \
	echo "$(BIN)/python -m pytest $(PTY_TESTS)   # the interview under a pty (CONTRACTS §1: the whole suite), its output:"; \
	cat "$$pty_log"; rm -f "$$pty_log"; \
	[ $$suite -eq 0 ] && [ $$pty -eq 0 ]
	@$(MAKE) --no-print-directory smoke

# the tests marked slow (`make test` runs them too): plans byte-identical in fresh processes with
# different hash seeds, interviews scripted with a plan per answer, and the interview under a
# pseudo-terminal
test-slow: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m slow

# the quick loop while editing: the tests not marked slow, without ruff, lint and smoke
test-fast: $(VENV)/.installed-test
	$(BIN)/python -m pytest $(PYTEST_XDIST) -m "not slow"

# Build the wheel, install it (no dependencies: they come from .venv) into a throw-away venv and
# run its console script: catches packaging mistakes (a missing data file) that the editable
# install hides.
smoke: $(VENV)/.installed-test
	@$(BIN)/python tests/smoke_wheel.py

rules-test: $(VENV)/.installed
	$(BIN)/servewise rules test

$(VENV)/.installed-bench: $(VENV)/.installed-test
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $@

# the speed targets of #14: cold runs, medians; `bench-doc` also rewrites docs/performance.md
bench: $(VENV)/.installed-test
	$(BIN)/python tests/bench/bench_plan.py
	$(BIN)/python tests/bench/bench_ask.py   # interview: answer → next prompt, start → first prompt

expert-review: $(VENV)/.installed
	$(BIN)/python -m tools.review   # writes docs/expert-review.md from examples/*.yaml

bench-doc: $(VENV)/.installed-bench
	$(BIN)/python tests/bench/bench_plan.py --doc docs/performance.md

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
