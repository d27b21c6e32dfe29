# Two entry points: `make run` and `make test`. Both build .venv from scratch
# when it is missing, so a fresh clone needs nothing but python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= .data

.PHONY: run test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

run: $(VENV)/.installed
	exec $(BIN)/nsqpy cluster --nsqd 1 --data-path $(DATA)

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest

bench: $(VENV)/.installed-test
	$(BIN)/python bench/run.py
	$(BIN)/python bench/client_bench.py
	$(BIN)/python bench/client_bench.py --compression
	$(BIN)/python bench/durability_bench.py

clean:
	rm -rf $(VENV) $(DATA) build src/*.egg-info
