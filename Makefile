# `make demo` and `make test` each create/refresh the local virtual environment, then run.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sklmoo-installed

.PHONY: venv demo test bench docs clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned to the CPU wheel on disk; everything else then sees it satisfied.
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	MPLBACKEND=Agg $(PY) -u -m sklmoo.demo

test: $(STAMP)
	MPLBACKEND=Agg $(PY) -m pytest -q

bench: $(STAMP)
	MPLBACKEND=Agg $(PY) benchmarks/bench_sampler_step.py

docs: $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[docs]'
	MPLBACKEND=Agg $(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

clean:
	rm -rf $(VENV) build *.egg-info docs/_build
