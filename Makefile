# llmctl developer targets. `make install` builds .venv with everything the tests need.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch, named for what it is: `+cpu` is the local version of PyTorch's CPU wheels
# (about 190 MB). The same version without it is, on PyPI, the CUDA build: a 527 MB wheel that pulls
# several GB of nvidia-* libraries. The pin with `+cpu` matches no CUDA wheel, so whichever source
# answers, what gets installed is the CPU build (`make install` checks: torch.version.cuda is None).
TORCH_CPU ?= torch==2.13.0+cpu
# Where that wheel comes from when no source pip is configured with has it: PyTorch's CPU index.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

STAMP := $(VENV)/.llmctl-installed
TORCH_STAMP := $(VENV)/.torch-installed

.PHONY: install upstream registry checkov docs test lint typecheck imports pkg-tree bench clean neuron-chart locks check-locks gpu-prepare verify-open-webui

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel

# torch once per venv (its own stamp: a pyproject.toml edit does not re-run it). First from the sources
# pip is configured with (a wheel folder or mirror that holds the CPU build: no download from PyTorch),
# else from PyTorch's CPU index (PyPI has no `+cpu` wheel, so the first try fails in a second there).
$(TORCH_STAMP): | $(BIN)/python
	$(BIN)/pip install --quiet "$(TORCH_CPU)" 2>/dev/null \
	  || $(BIN)/pip install --quiet "$(TORCH_CPU)" --extra-index-url "$(TORCH_INDEX)"
	$(BIN)/python -W ignore -c "import sys, torch; sys.exit(None if torch.version.cuda is None else \
	  f'torch {torch.__version__} is a CUDA build; make install wants the CPU build ($(TORCH_CPU))')"
	touch $(TORCH_STAMP)

# Re-installs only when pyproject.toml or setup.py changes (the package itself is an editable install;
# a new subpackage inside a mapped folder needs no reinstall: the editable finder maps the folders).
# setuptools prints one notice at every editable install of a package whose folders are mapped
# (package-dir: core/ is `llmctl`, ...), whatever the project: "Editable installation. Please be
# careful with folders in your working directory with the same name as your package as they may
# take precedence during imports" (setuptools/command/editable_wheel.py, _TopLevelFinder.__exit__,
# setuptools 84). No folder at the root is named `llmctl` (test_foundation_packaging.py checks), so
# it never applies here: that notice alone is silenced, by its first words.
EDITABLE_NOTICE := ignore:Editable installation:UserWarning
$(STAMP): pyproject.toml setup.py $(TORCH_STAMP) | $(BIN)/python
	PYTHONWARNINGS="$(EDITABLE_NOTICE)" $(BIN)/pip install --quiet -e ".[serving,bench,test]"
	touch $(STAMP)

install: $(STAMP)

# The upstream reference files (CRDs, chart values, IAM policies) the conformance tests read: pinned
# in tests/conformance/upstream_manifest.yaml, placed in ~/.cache/llmctl/upstream verified by sha256.
upstream: install
	$(BIN)/python tests/conformance/upstream_sources.py

# On every core plus one (pytest-xdist); the tests that start Ray or a local server are grouped on one
# worker (`xdist_group("ray")`), and each run's wall time and slowest tests go to $(SUITE_REPORT):
# build/suite.json, outside the tracked tree, so a run leaves `git status` clean; to record a run in
# the repository on purpose: `make test SUITE_REPORT=benchmarks/results/suite.json`. The extra worker: the Ray tests spend much of their time waiting on
# their servers (replica starts, Serve's delays), which left one core half idle with one worker per core.
SUITE_REPORT ?= build/suite.json
TEST_WORKERS ?= $(shell $(PY) -c "import os; print((os.cpu_count() or 1) + 1)")
# The image-registry tests (tests/lifecycle/test_image_checks.py) start a real registry server:
# Debian's docker-registry package (the CNCF distribution registry), installed here when missing.
registry:
	@test -x /usr/bin/docker-registry || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null; \
	  else echo "make test needs Debian's docker-registry: sudo apt-get install -y docker-registry" >&2; exit 1; fi; }

# checkov (tests/workload/test_checkov.py scans every catalog blueprint's render with it) in its own
# environment: it pins boto3 and packaging versions older than llmctl's. Re-made when its pin changes.
CHECKOV_VENV ?= .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
$(CHECKOV_STAMP): tests/workload/checkov-requirements.txt
	$(PY) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet -r tests/workload/checkov-requirements.txt
	touch $(CHECKOV_STAMP)

checkov: $(CHECKOV_STAMP)

# The documentation site (mkdocs.yml): MkDocs and its Material theme, pinned in docs/requirements.txt,
# installed into .venv once (its own stamp; `python -m pip`: a copied venv's pip script may name
# another interpreter). `--strict`: a broken link or anchor, or a page outside the navigation, fails
# the build. The CLI reference page is generated from the Typer app at each build
# (docs/_hooks/cli_reference.py). Output in build/site (ignored by git).
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): docs/requirements.txt | $(STAMP)
	$(BIN)/python -m pip install --quiet -r docs/requirements.txt
	touch $(DOCS_STAMP)

docs: install $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# With bytecode caching on even where the shell sets PYTHONDONTWRITEBYTECODE (this team's machines do):
# without it every worker, and every `python -m llmctl` a test starts, compiles each module it imports
# from source again (collection alone took 7-9 CPU s per worker instead of about 4).
test: install upstream registry checkov docs
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --suite-report=$(SUITE_REPORT)

lint: install typecheck imports
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy --strict and import-linter on the import package. Both read a package from folders shaped like
# its import names: mypy maps `llmctl.infra.aws` to llmctl/infra/aws/ on MYPYPATH or in site-packages
# (it has no option mapping one package onto several folders, and it does not run the editable
# install's import hook), and import-linter (grimp) walks the folder of `llmctl`'s spec, which for the
# editable install is core/ alone. So both read build/pkg, a tree of links shaped like the installed
# package: core/'s files and one link per layer folder (edits show through; nothing is copied).
PKG_TREE := build/pkg
pkg-tree:
	rm -rf $(PKG_TREE) && mkdir -p $(PKG_TREE)/llmctl
	for f in core/*; do ln -s "$(CURDIR)/$$f" $(PKG_TREE)/llmctl/; done
	for d in cli blueprints infra serving; do ln -s "$(CURDIR)/$$d" $(PKG_TREE)/llmctl/$$d; done

typecheck: install pkg-tree
	cd $(PKG_TREE) && MYPYPATH=. $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p llmctl

# The import contracts in pyproject.toml ([tool.importlinter]: layers, independent runtimes, pod code
# apart from serving/client, no cycles).
imports: install pkg-tree
	cd $(PKG_TREE) && PYTHONPATH=. $(CURDIR)/$(BIN)/lint-imports --config $(CURDIR)/pyproject.toml --no-cache

# One lock per component (runtime or UI) and base image (serving/locks/locks.yaml), resolved with uv for the image's
# Python and platform, with hashes, constrained by what the image ships. Needs the package index.
locks: install
	$(BIN)/python -m llmctl.serving.lock_compile write

# Re-resolve every committed lock against the live index (what tests/serving/test_locks.py does).
check-locks: install
	$(BIN)/python -m llmctl.serving.lock_compile check

bench: install
	$(BIN)/python benchmarks/run.py

# The pinned Open WebUI run as its pod runs it: non-root, on a read-only view of the image's layout, an
# empty folder at each volume of the render, then once without each volume (benchmarks/verify_open_webui.py;
# the release from PyPI into its own venv, /tmp/owui). Needs root on Linux; not part of `make test`.
# Writes benchmarks/results/open-webui-nonroot.json, which tests/workload/test_open_webui_pod.py checks.
OPEN_WEBUI_VOLUMES := static llmctl-home llmctl-tmp llmctl-var-tmp data
verify-open-webui: install
	$(BIN)/python benchmarks/verify_open_webui.py $(addprefix --without ,$(OPEN_WEBUI_VOLUMES))

# The GPU run (docs/testing.md, "Runs on a GPU"; never part of `make test`: CI has no GPU): downloads
# the vLLM/Ray wheels of benchmarks/gpu/carry-*.txt for the device's Python, builds this llmctl's
# wheel, renders the 70B blueprint's serveConfigV2 and splits it all into parts the device calls carry.
# GPU_SETS picks the wheel sets (v26: Ray Serve LLM's vLLM; v22: Triton's): `make gpu-prepare GPU_SETS=v26`
# for a run without Triton's engine downloads and carries v26 alone.
GPU_SETS ?= v26,v22
gpu-prepare: install
	$(BIN)/python benchmarks/gpu/prepare.py --sets $(GPU_SETS)

# Where public.ecr.aws is reachable: pull the pinned Neuron chart and check the values llmctl sets
# against its values.yaml (issue 25; record the result under upstream_files.neuron in versions.yaml).
NEURON_CHART_DIR := build/neuron-chart
neuron-chart: install
	rm -rf $(NEURON_CHART_DIR) && mkdir -p $(NEURON_CHART_DIR)
	helm pull oci://public.ecr.aws/neuron/neuron-helm-chart --untar --untardir $(NEURON_CHART_DIR) \
		--version $$($(BIN)/python -c 'from llmctl.blueprints.versions import versions; print(versions().charts["neuron"].version)')
	$(BIN)/python tests/conformance/neuron_chart_check.py $(NEURON_CHART_DIR)/neuron-helm-chart

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache

# Mutation testing of the decision modules (benchmarks/mutation_modules.toml) with cosmic-ray: each
# module's mutants against its own test files, results in benchmarks/results/mutation.json. Not part
# of `make test`; MODULES="a b" runs only those; JOBS=n modules at a time, each in its own copy of
# the tree (default: one per core).
.PHONY: mutation
MUTATION_STAMP := $(VENV)/.cosmic-ray-installed
$(MUTATION_STAMP): | $(STAMP)
	$(BIN)/pip install --quiet "cosmic-ray==8.7.0"
	touch $(MUTATION_STAMP)

mutation: install $(MUTATION_STAMP)
	nice -n 19 $(BIN)/python benchmarks/mutation.py $(if $(JOBS),--jobs $(JOBS)) $(MODULES)
