# autodiff_lab — two commands: `make lab` (open the course) and `make test` (run every check).
# Only Python >= 3.10 and make are needed; everything else is pip-installed into .venv.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 8888
TOKEN  ?=
# JupyterLab refuses to run as root without --allow-root.
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
# Stored notebook outputs are rendered with the pip-installed wasm Graphviz on every
# machine, so they compare equal whether or not a `dot` binary is installed.
export AUTODIFF_LAB_RENDERER ?= wasm
# One BLAS thread: repeatable timings, no oversubscription on small machines.
export OMP_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
PYTEST_FLAGS ?=
# Python writes its byte-code caches (__pycache__/, git-ignored) even where the environment
# turns them off: each of the suite's processes would otherwise compile every test module and
# the package again (measured: pytest's collection 26 s of CPU per process without, 14 s with).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: lab lecture test test-exhaustive test-lecture test-min bench notebooks exercises slides book lint format clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.lab-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[lab]'
	touch $@

# PyTorch (the tests' oracle) comes first, from PyTorch's CPU index where it is reachable: on
# Linux, PyPI's torch==2.13.0 is the CUDA build (about 5.8 GB in .venv with its nvidia-* wheels),
# the CPU wheel about 0.2 GB. pip prefers 2.13.0+cpu when both indexes answer; where the CPU
# index cannot be reached, PyPI's build is installed and the suite passes with it too (the
# grader limits a worker's resident memory, not its address space). macOS and Windows get
# PyPI's CPU build either way. The test extra's torch==2.13.0 is then already satisfied.
TORCH_PIN := torch==2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --retries 1 --extra-index-url $(TORCH_CPU_INDEX) $(TORCH_PIN)
	$(BIN)/pip install -q -e '.[lab,test,book]'
	touch $@ $(VENV)/.lab-installed $(VENV)/.book-installed

## make lab: set up and open the course in JupyterLab, in a working copy (my-course/, git-ignored;
## `autodiff-lab start` copies the chapters and exercises there, keeping your edits), so using the
## course never modifies the committed notebooks. To edit those (a maintainer): .venv/bin/jupyter lab
COURSE_COPY ?= my-course
lab: $(VENV)/.lab-installed
	$(BIN)/python tools/lab_settings.py
	$(BIN)/autodiff-lab start $(COURSE_COPY) --port=$(PORT) --token='$(TOKEN)'

## make test: set up and run every test (unit, vs PyTorch, notebooks, grading, browser)
test: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m autodiff_lab.cli build-exercises --check
	$(BIN)/python tools/run_pytest.py -m "not exhaustive" $(PYTEST_FLAGS)

## make test-exhaustive: the checks that take minutes, kept out of make test's 5-minute budget
## (the browser walk and audit, the book, the wheel, every chapter cell against every exercise,
## the notebooks again with SIMD paths off); .ci/run runs them after make test
test-exhaustive: $(VENV)/.test-installed
	$(BIN)/python tools/run_pytest.py --exhaustive $(PYTEST_FLAGS)
	$(MAKE) test-lecture

## make lecture: present a chapter as a slideshow whose widgets are live. RISE's slideshow
## (jupyterlab-rise 0.43.1, the newest) cannot load ipywidgets 8's widget manager, so the course
## opens from an environment of its own, .venv-lecture (git-ignored): the lab extra with
## ipywidgets 7.8.5 and the versions it was tested with (tools/lecture-constraints.txt, each pin
## with its reason). It opens the same working copy as `make lab` (the same recipe), so the
## committed notebooks are never modified. Alt+R on a notebook starts its slideshow.
LECTURE_VENV ?= .venv-lecture
LECTURE_PINS := tools/lecture-constraints.txt

# The venv is made by the rule that makes .venv; .lab-installed is touched too, so that
# `make lab VENV=$(LECTURE_VENV)` finds the lab set up and only opens it.
$(LECTURE_VENV)/.lecture-installed: pyproject.toml $(LECTURE_PINS)
	$(MAKE) --no-print-directory VENV=$(LECTURE_VENV) $(LECTURE_VENV)/bin/python
	$(LECTURE_VENV)/bin/pip install -q -c $(LECTURE_PINS) -e '.[lab]'
	touch $@ $(LECTURE_VENV)/.lab-installed

lecture: $(LECTURE_VENV)/.lecture-installed
	$(MAKE) lab VENV=$(LECTURE_VENV)

## make test-lecture: the RISE browser tests (tests/browser/test_rise_slides.py: widgets driven
## inside the slideshow) in .venv-lecture, with the test tools they import (tools/lecture_env.py);
## make test-exhaustive runs it. Under ipywidgets 8 (make test) those tests are a strict xfail.
$(LECTURE_VENV)/.lecture-test-installed: $(LECTURE_VENV)/.lecture-installed tools/lecture_env.py
	$(LECTURE_VENV)/bin/pip install -q -c $(LECTURE_PINS) \
		$$($(LECTURE_VENV)/bin/python tools/lecture_env.py)
	touch $@

test-lecture: $(LECTURE_VENV)/.lecture-test-installed
	AUTODIFF_LAB_LECTURE_ENV=1 $(LECTURE_VENV)/bin/python -m pytest \
		tests/browser/test_rise_slides.py -p no:cacheprovider -q -ra $(PYTEST_FLAGS)

## make test-min: the lowest versions pyproject.toml allows (uv's lowest-direct resolution),
## running the engine tests and strict nbval. pip installs the pinned torch first, so that uv
## keeps it instead of downloading another build. uv trusts the system's certificates, as pip
## does (its own bundle fails behind a proxy with its own certificate authority).
MIN_VENV ?= .venv-min
$(MIN_VENV)/.installed: pyproject.toml
	rm -rf $(MIN_VENV)
	$(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install -q uv
	$(MIN_VENV)/bin/python -m pip install -q --retries 1 --extra-index-url $(TORCH_CPU_INDEX) $(TORCH_PIN)
	UV_SYSTEM_CERTS=1 $(MIN_VENV)/bin/uv pip install -q --python $(MIN_VENV)/bin/python \
		--resolution lowest-direct -e '.[lab,test]'
	touch $@

test-min: $(MIN_VENV)/.installed
	$(MIN_VENV)/bin/python -m pip list --format=freeze 2>/dev/null \
		| grep -iE '^(numpy|matplotlib|ipywidgets|graphviz|scikit-learn|ipykernel|nbval)=='
	$(MIN_VENV)/bin/python -m pytest tests/test_engine_*.py tests/test_higher_*.py \
		notebooks solutions --nbval --nbval-current-env \
		--nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider -q

## make bench: speed against micrograd, hand-written numpy and PyTorch (ratios)
bench: $(VENV)/.test-installed
	$(BIN)/python -m benchmarks

## make notebooks: re-execute every chapter and solution notebook in place
notebooks: $(VENV)/.test-installed
	$(BIN)/python tools/execute_notebooks.py

## make exercises: regenerate exercises/ from solutions/ (keeps students' edits)
exercises: $(VENV)/.lab-installed
	$(BIN)/autodiff-lab build-exercises

## make slides: every chapter as self-contained offline HTML slides in build/slides/
slides: $(VENV)/.lab-installed
	$(BIN)/autodiff-lab slides all --offline

## make book: the course as a static website in build/book/ (open build/book/index.html): every
## chapter and exercise notebook with its committed outputs (never re-run), the guides in docs/;
## it loads nothing from the network
$(VENV)/.book-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[lab,book]'
	touch $@

book: $(VENV)/.book-installed
	$(BIN)/python -m sphinx -q -b html -c docs -d build/book-doctrees . build/book

## make lint / make format: ruff (and mypy) checks / fixes (set up .venv first on a fresh clone)
lint: $(VENV)/.test-installed
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

format: $(VENV)/.test-installed
	$(BIN)/ruff check --fix . && $(BIN)/ruff format .

clean:
	rm -rf $(VENV) $(MIN_VENV) $(LECTURE_VENV) .pytest_cache .hypothesis build *.egg-info
