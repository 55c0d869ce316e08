# `make demo` and `make test` each create/refresh the local virtual environment, then run.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sklmoo-installed
DOCS_STAMP := $(VENV)/.sklmoo-docs-installed

# pip install, not quiet (pip lists what it installs or finds already there), with a line
# saying what is being installed before it and how long it took after it
define pip_install
	@echo ">>> pip install $(1)"
	@start=$$(date +%s); $(PY) -m pip install --disable-pip-version-check $(1) && \
	echo ">>> pip install $(1): done in $$(( $$(date +%s) - start )) s"
endef

.PHONY: venv demo test bench docs clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned to the CPU wheel on disk; everything else then sees it satisfied.
	$(call pip_install,torch==2.13.0)
	$(call pip_install,-e '.[test]')
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	MPLBACKEND=Agg $(PY) -u -m sklmoo.demo

# two pytest workers (pytest-xdist), one thread each: the tests' fits are small, and two
# processes of two threads on two cores spend their time waiting on each other's threads
test: $(STAMP)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MPLBACKEND=Agg \
	$(PY) -m pytest -q -n 2

bench: $(STAMP)
	MPLBACKEND=Agg $(PY) benchmarks/bench_sampler_step.py

# the docs' extras, like the rest, are installed again only when the package's metadata changed
$(DOCS_STAMP): $(STAMP) setup.cfg pyproject.toml
	$(call pip_install,-e '.[docs]')
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	MPLBACKEND=Agg $(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

clean:
	rm -rf $(VENV) build *.egg-info docs/_build
