# msprof_cli — run `make help` for the targets.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
DEMO_OUT ?= demo_output
TEST_WORKERS ?= 2

.DEFAULT_GOAL := help
.PHONY: help install install-test demo test test-fast bench calibrate lint clean

help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  make %-13s %s\n", $$1, $$2}'

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: $(VENV)/bin/python setup.cfg setup.py
	$(PIP) install -q -e '.[tf]'
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q -e '.[tf,test]'
	touch $@

install: $(VENV)/.installed ## Create .venv and install msprof_cli with TensorFlow (CPU)

install-test: $(VENV)/.installed-test ## Install msprof_cli plus the test dependencies

demo: install ## Install, then collect, export and query the bundled example (examples/keras_cnn.py)
	$(VENV)/bin/msprof collect --output $(DEMO_OUT) -- $(PY) examples/keras_cnn.py
	$(VENV)/bin/msprof export --output $(DEMO_OUT)
	$(VENV)/bin/msprof query --output $(DEMO_OUT)
	@echo
	@echo "Demo results are in $(DEMO_OUT)/PROF_*/ (device_0/summary, device_0/timeline)."

test: install-test ## Install test dependencies and run the whole test suite (TEST_WORKERS=2 processes)
	$(PY) -m pytest -q -n $(TEST_WORKERS)

test-fast: install-test ## Run the tests that do not start TensorFlow
	$(PY) -m pytest -q -n $(TEST_WORKERS) -m "not e2e"

bench: install-test ## Run the benchmarks (export tiny/50k/1M tasks and, if the real analysis is laid out, side by side with it; query, startup, collect overhead; BENCH_ARGS=--big adds 10M)
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

calibrate: install ## Calibration against published Ascend 910 figures (installs tf_keras, ~10-20 min)
	$(PIP) install -q --no-deps 'tf_keras~=2.21.0'
	$(PY) benchmarks/calibration.py $(CALIB_ARGS)

clean: ## Remove the virtualenv, build files and demo output
	rm -rf $(VENV) build *.egg-info $(DEMO_OUT) .pytest_cache
