# Two entry points: `make run` and `make test`. Both build .venv from scratch
# when it is missing, so a fresh clone needs nothing but python3; `make spark`
# adds the Spark data pipeline to the first (docs/spark.md); `make test`
# also installs Java 17 with apt-get when no Java 17+ is found (Spark runs on it)
# and Debian's chromium and chromium-driver (nsqadmin's browser tests),
# prometheus (the metrics scrape test) and etcd-server (replicated nsqd's
# coordination) when missing.
#
# nsqd's hot modules are compiled with mypyc when installing (setup.py), so
# the install steps make sure a C compiler and Python's headers are there
# (gcc and python3-dev with apt-get when missing), and `make test` runs the
# whole suite compiled on three pytest-xdist workers (most tests wait on
# daemons, not on a core; tests/conftest.py says in which order they
# start), and beside it the unit and integration tests again as pure Python
# (NSQPY_PURE=1 imports the .py files; see nsqpy/_pure.py; the packaging
# tests install pure builds too).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= .data

# editing any module rebuilds the install: the compiled ones (listed in
# setup.py) take their types from the modules they import as well
SOURCES := $(shell find src/nsqpy -name '*.py')

.PHONY: run run-replicated spark test test-prerequisites debian-packages test-pythons bench compiler java browser \
	prometheus etcd clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# An editable install leaves the source tree without bytecode, and a daemon
# started without it compiles nsqpy first (25-30 ms of its start when quiet,
# more on a busy machine): compiled once here
BYTECODE = $(BIN)/python -m compileall -q src/nsqpy

# one stamp per extra: .installed-test (make test), .installed-spark (make spark)
$(VENV)/.installed-%: pyproject.toml setup.py $(SOURCES) | $(BIN)/python compiler
	$(BIN)/pip install -q -e '.[$*]'
	$(BYTECODE)
	touch $@

$(VENV)/.installed: pyproject.toml setup.py $(SOURCES) | $(BIN)/python compiler
	$(BIN)/pip install -q -e .
	$(BYTECODE)
	touch $@

run: $(VENV)/.installed
	exec $(BIN)/nsqpy cluster --nsqd 1 --data-path $(DATA)

# etcd, nsqlookupd, three nsqd replicating each message to two of them, nsqadmin
run-replicated: $(VENV)/.installed etcd
	exec $(BIN)/nsqpy cluster --nsqd 3 --replication-factor 2 --data-path $(DATA)

# The spark extra (PySpark, PyArrow, pandas, Spark Connect's client) in the
# venv `make run` made, and Java 17 when none is found; `make test` has both
spark: $(VENV)/.installed-spark java

# On a new machine the venv's install (mostly a minute of compiling, on one
# core) and the Debian packages the tests need (their downloads and dpkg)
# take about as long each: side by side, not one after the other. apt-get
# runs one at a time (dpkg's lock), so the packages come one after another.
test-prerequisites: compiler
	@$(MAKE) --no-print-directory -j2 --output-sync=target $(VENV)/.installed-test debian-packages

debian-packages:
	@for target in java browser prometheus etcd; do $(MAKE) --no-print-directory $$target || exit 1; done

compiler:
	@if [ -z "$$NSQPY_PURE" ] && { ! command -v gcc >/dev/null || \
	    [ ! -f "$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; }; then \
	  echo "nsqd's hot modules are compiled with mypyc: installing gcc and python3-dev with apt-get"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq gcc python3-dev; \
	fi

java:
	@if ! java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; then \
	  echo "Spark needs Java 17 or newer: installing openjdk-17-jre-headless with apt-get"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq openjdk-17-jre-headless; \
	fi

browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  echo "nsqadmin's browser tests need chromium: installing chromium and chromium-driver with apt-get"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium chromium-driver; \
	fi

prometheus:
	@if ! command -v prometheus >/dev/null; then \
	  echo "the metrics test scrapes with a real Prometheus: installing prometheus with apt-get"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq prometheus; \
	fi

etcd:
	@if ! command -v etcd >/dev/null; then \
	  echo "replicated nsqd coordinates through etcd: installing etcd-server with apt-get"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq etcd-server; \
	fi

# The pure-Python pass runs beside the compiled one, on a worker of its own:
# the compiled pass leaves a third of the two cores idle (its tests mostly
# wait on daemons), and the pure one ends well before it (7 minutes of 15).
# Its output follows the compiled pass's. bash, so that the background pass
# takes Ctrl-C (sh leaves a background command ignoring it) and stops its
# daemons.
test: SHELL := /bin/bash
test: test-prerequisites
	@$(BIN)/python -c 'import nsqpy.nsqd.channel as m; print("nsqd hot modules:", "pure Python" if m.__file__.endswith(".py") else "compiled")'
	@echo "NSQPY_PURE=1 $(BIN)/python -m pytest -n 1 --durations=10 tests/unit tests/integration, beside:"
	@echo "$(BIN)/python -m pytest -n 3 --dist worksteal --durations=20"
	@(trap - INT; NSQPY_PURE=1 exec $(BIN)/python -m pytest -n 1 -p no:cacheprovider --durations=10 \
	    tests/unit tests/integration > $(VENV)/pure-pass.log 2>&1) & pure=$$!; \
	$(BIN)/python -m pytest -n 3 --dist worksteal --durations=20; compiled=$$?; \
	wait $$pure; purely=$$?; \
	echo "== the unit and integration tests as pure Python (NSQPY_PURE=1), run beside the compiled pass:"; \
	cat $(VENV)/pure-pass.log; exit $$(( compiled || purely ))

# The other Pythons nsqpy supports, each in a venv of its own (.venv-3.12,
# .venv-3.13), compiled: the unit, integration, interop and packaging tests
# and a Spark smoke. `make test` covers 3.11 and installs a wheel on each.
PYTHONS ?= $(wildcard $(HOME)/.pyenv/versions/3.12.*/bin/python $(HOME)/.pyenv/versions/3.13.*/bin/python)
SPARK_SMOKE := tests/spark/test_source.py::test_available_now_archives_every_message_once_and_acknowledges_it \
	tests/spark/test_sink.py::test_round_trip_dataframe_to_topic_to_dataframe

test-pythons: java compiler
	@[ -n "$(PYTHONS)" ] || { echo "no Python 3.12 or 3.13 found: set PYTHONS=/path/to/python ..."; exit 1; }
	@for python in $(PYTHONS); do \
	  venv=.venv-$$($$python -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	  echo "== $$venv ($$python)"; \
	  { [ -x $$venv/bin/python ] || $$python -m venv $$venv; } && \
	  $$venv/bin/pip install -q --upgrade pip && $$venv/bin/pip install -q -e '.[test]' && \
	  $$venv/bin/python -m pytest -n 3 --dist worksteal --durations=5 \
	    tests/unit tests/integration tests/interop tests/packaging $(SPARK_SMOKE) || exit 1; \
	done

bench: $(VENV)/.installed-test java
	$(BIN)/python bench/run.py
	$(BIN)/python bench/client_bench.py
	$(BIN)/python bench/client_bench.py --compression
	$(BIN)/python bench/durability_bench.py
	$(BIN)/python bench/spark_bench.py

clean:
	rm -rf $(VENV) $(VENV)-3.* $(DATA) build src/*.egg-info
	find src -name '*.so' -delete
