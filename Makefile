# servewise — the two commands of CONTRACTS §1. Both create .venv if missing and need no
# activated environment; run them as often as you like.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: expert-review run test lint rules-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/servewise plan examples/chat-70b-online.yaml

test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/servewise rules lint
	$(BIN)/python -m pytest -n 2 --ignore=tests/test_ask_pty.py
	$(BIN)/python -m pytest tests/test_ask_pty.py   # pseudo-terminal tests: forkpty outside xdist's threads

rules-test: $(VENV)/.installed
	$(BIN)/servewise rules test

bench: $(VENV)/.installed-test
	$(BIN)/python tests/bench/bench_plan.py

expert-review: $(VENV)/.installed
	$(BIN)/python -m servewise.cli.review   # writes docs/expert-review.md from examples/*.yaml

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
