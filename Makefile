# llmctl developer targets. `make install` builds .venv with everything the tests need.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch; a bare `torch` would pull a multi-GB CUDA build.
TORCH_CPU ?= torch==2.13.0

STAMP := $(VENV)/.llmctl-installed

.PHONY: install test lint typecheck bench clean locks check-locks

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel

# Re-installs only when pyproject.toml changes (the package itself is an editable install).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet "$(TORCH_CPU)"
	$(BIN)/pip install --quiet -e ".[serving,bench,test]"
	touch $(STAMP)

install: $(STAMP)

test: install
	$(BIN)/python -m pytest -q

lint: install typecheck
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy --strict on the import package. The layer folders are mapped into `llmctl` by setuptools;
# mypy cannot follow that mapping, so it checks a tree of links shaped like the installed package.
typecheck: install
	rm -rf build/typecheck && mkdir -p build/typecheck/llmctl
	cp -r llmctl/. build/typecheck/llmctl/
	for d in cli blueprints infra serving; do ln -s "$(CURDIR)/$$d" build/typecheck/llmctl/$$d; done
	cd build/typecheck && MYPYPATH=. $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p llmctl

# One lock per runtime and base image (serving/locks/locks.yaml), resolved with uv for the image's
# Python and platform, with hashes, constrained by what the image ships. Needs the package index.
locks: install
	$(BIN)/python -m llmctl.serving.lock_compile write

# Re-resolve every committed lock against the live index (what tests/serving/test_locks.py does).
check-locks: install
	$(BIN)/python -m llmctl.serving.lock_compile check

bench: install
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
