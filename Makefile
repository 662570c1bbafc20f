# Every command a user, an instructor or CI runs (`make help` lists them). The two that matter:
#   make run    set up if needed, then execute every notebook into build/notebooks/
#   make test   set up if needed, then lint, unit tests, and every notebook (quick mode)
# On a lent GPU machine without network: `make gpu-all OUT=folder` (see CONTRIBUTING.md).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The pinned versions every install uses (pip --constraint): `make constraints` rewrites it.
CONSTRAINTS := constraints.txt
PIP_INSTALL = -m pip install --quiet --constraint $(CONSTRAINTS)
# setuptools' ten-line "Editable installation" warning, printed on every editable install
EDITABLE := PYTHONWARNINGS='ignore:Editable installation'
# The torch build: constraints.txt's version; PyPI's default (CUDA) build where an NVIDIA
# driver is present, otherwise the CPU build. Override with e.g. `make TORCH_SPEC='torch==2.11.0' test`.
TORCH_SPEC ?= torch==$(shell sed -n 's/^torch==//p' $(CONSTRAINTS))
# Where torch comes from: a wheel already on this machine when pip's configuration points at
# one (find-links: fast, offline); else, on Linux without an NVIDIA driver, PyTorch's CPU index
# (PyPI's Linux torch bundles CUDA, several GB); else PyPI.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_INDEX ?= $(if $(shell command -v nvidia-smi 2>/dev/null),,$(if $(filter Linux,$(shell uname -s)),--index-url $(TORCH_CPU_INDEX)))
# $(call install_torch,VENV_BIN): install TORCH_SPEC into that environment, from where it comes.
install_torch = if $(1)/python -m pip install --quiet --dry-run --no-index --no-deps "$(TORCH_SPEC)" >/dev/null 2>&1; \
	then $(1)/python -m pip install --quiet "$(TORCH_SPEC)"; \
	else $(1)/python -m pip install --quiet $(TORCH_INDEX) "$(TORCH_SPEC)"; fi
# Notebooks run two at a time on a machine without a GPU (CI has two cores), one at a time
# where a GPU is measured (two notebooks timing the same GPU would disturb each other).
JOBS ?= $(if $(shell command -v nvidia-smi 2>/dev/null),1,2)

.PHONY: help setup constraints slow-test measuring-code run test replay-all index lab reset-workspace fresh-notebook-test lint unit notebooks clean gpu-wheels gpu-prepare gpu-all gpu-check unpack site site-test

## help: this list
help:
	@awk '/^## [a-z0-9-]+:/ { sub(/^## /, ""); print ""; print; next } /^## / { sub(/^## /, "    "); print }' $(MAKEFILE_LIST)

## setup: the virtual environment .venv (done by every target that needs it)
setup: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "the course needs Python 3.11 or newer; $(PYTHON) is " + sys.version.split()[0] + ": run e.g. make PYTHON=python3.12")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(call install_torch,$(BIN))
	$(EDITABLE) $(BIN)/python $(PIP_INSTALL) -e ".[notebooks,dev,cli]"
	touch $@

## constraints: rewrite constraints.txt, one version in each of pyproject.toml's ranges (then commit it)
constraints: $(STAMP)
	$(BIN)/python -m pip install --quiet --dry-run --ignore-installed --report build/pip-report.json \
	    "$(TORCH_SPEC)" ".[torch,notebooks,dev,lab,cli]"
	$(BIN)/python tools/constraints.py build/pip-report.json > $(CONSTRAINTS)

## run: execute every notebook (live where the hardware is, replaying elsewhere), with outputs
run: $(STAMP)
	rm -rf build/notebooks && mkdir -p build/notebooks
	cp notebooks/*.ipynb build/notebooks/
	$(BIN)/pytest -p no:cacheprovider -q -n $(JOBS) --nbmake --overwrite \
	    --nbmake-timeout=1200 build/notebooks
	@echo "Executed notebooks, with their outputs: build/notebooks/ (open them with 'make lab')"

## test: ruff, the unit tests, every notebook in quick mode (replaying where needed), then the
## truth check: each notebook replayed on each machine that recorded it, its checks and verdicts
## against its numbers, results/index.jsonl current (tools/replay_all.py)
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python tools/install_cell.py check notebooks/*.ipynb
	COURSE_QUICK=1 $(BIN)/pytest -q -n $(JOBS) -m "not gpu and not gpu2 and not slow" --durations=10 \
	    --nbmake --nbmake-timeout=300 tests notebooks
	$(BIN)/python tools/replay_all.py

## lint: ruff check, ruff format --check and mypy on helpers/ (mypy and pre-commit come from the
## lint extra, installed on first use). STRICT_FORMAT= (empty) reports the format check without
## failing, for a branch from before the repository-wide format.
STRICT_FORMAT ?= 1
lint: $(STAMP)
	@$(BIN)/python -c "import mypy" 2>/dev/null || $(EDITABLE) $(BIN)/python $(PIP_INSTALL) -e ".[dev,lint]"
	$(BIN)/ruff check .
	$(if $(STRICT_FORMAT),$(BIN)/ruff format --check .,@$(BIN)/ruff format --check --output-format concise . \
	    | tail -1 | sed 's/$$/ (not enforced until the repository-wide ruff format: STRICT_FORMAT=1)/')
	$(BIN)/mypy

## unit: the fast inner loop: the unit tests that start no process and run no notebook (about
## 20 s on two cores); `make test` runs them all, and the notebooks, and the truth check
UNIT_SLOW := tests/test_cli.py tests/test_distributed.py tests/test_collectives.py
unit: $(STAMP)
	$(BIN)/pytest -q -n $(JOBS) -m "not gpu and not gpu2 and not slow" $(foreach f,$(UNIT_SLOW),--ignore=$(f)) tests

## measuring-code: after a change to timing, trace or distributed, and after deciding whether it
## changes what experiments measure (then bump records.MEASURING_VERSION by hand), write the new
## hash into records.MEASURING_CODE (the guard test test_the_measuring_code_is_changed_deliberately)
measuring-code: $(STAMP)
	$(BIN)/python -c "from helpers.records import fingerprints; print('MEASURING_CODE =', fingerprints.write_measuring_code())"

## slow-test: the course installed as a learner gets it, in a fresh environment (pip: minutes;
## .ci/run runs it after `make test`): the committed first cell beside another torch, and the wheel
slow-test: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider -m slow tests/test_fresh_install.py

## replay-all: only the truth check of `make test`: each notebook replayed on each machine that
## recorded it (executed copies in build/replay/<machine>/), checks, verdicts, index current
replay-all: $(STAMP)
	$(BIN)/python tools/replay_all.py

## index: rewrite results/index.jsonl (figures from the recordings, verdicts from the replays), then
## results/run_to_run.json (how far each claim moved between runs) and the verdicts again with it
index: $(STAMP)
	$(BIN)/python tools/replay_all.py --write
	$(BIN)/python tools/run_to_run.py
	$(BIN)/python tools/replay_all.py --write

## lab: JupyterLab on workspace/, your own copies of the notebooks (executed ones after `make run`),
## so exercises and autosaves never touch notebooks/. LAB_PORT=8899, NO_BROWSER=1 (remote machines).
LAB_PORT ?= 8888
NO_BROWSER ?=
lab: $(STAMP)
	@$(BIN)/python -c "import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); \
	    sys.exit(s.connect_ex(('127.0.0.1', $(LAB_PORT))) == 0 and f'port $(LAB_PORT) is busy (another lab?): run make lab LAB_PORT={$(LAB_PORT) + 1}')"
	@$(BIN)/python -c "import jupyterlab" 2>/dev/null || $(EDITABLE) $(BIN)/python $(PIP_INSTALL) -e ".[dev,lab]"
	$(BIN)/python tools/workspace.py prepare
	@echo "JupyterLab on workspace/ at http://localhost:$(LAB_PORT)/lab (with the token printed below)"
	$(BIN)/jupyter lab --ServerApp.root_dir=workspace --port=$(LAB_PORT) --ServerApp.port_retries=0 \
	    $(if $(filter 1,$(NO_BROWSER)),--no-browser) $(if $(filter 0,$(shell id -u)),--allow-root)

## reset-workspace: put one notebook of workspace/ back as the course has it (NOTEBOOK=...; your
## copy is kept beside it as NAME.backup-TIME.ipynb)
NOTEBOOK ?=
reset-workspace:
	@$(PYTHON) tools/workspace.py reset $(NOTEBOOK)

## fresh-notebook-test: a committed notebook run alone, as in Colab: a fresh environment outside
## the clone (a Jupyter kernel and torch, no course), its first cell installs the course from
## this repository, then it replays (tools/install_cell.py trial). 1-4 minutes with the wheels on
## the disk, mostly pip (1:09 on an idle 2-core machine, 3:40 on a busy one; the notebook's own run,
## first cell included, 28 s). `make slow-test` runs it beside another torch, and the wheel.
FRESH_NOTEBOOK ?= 00_start_here
fresh-notebook-test:
	@dir=$$(mktemp -d /tmp/course-alone-XXXXXX) && trap 'rm -rf "$$dir"' EXIT && \
	$(PYTHON) -m venv "$$dir/venv" && \
	$(call install_torch,$$dir/venv/bin) && \
	"$$dir/venv/bin/python" $(PIP_INSTALL) nbclient ipykernel && \
	$(PYTHON) tools/install_cell.py trial --python "$$dir/venv/bin/python" --folder "$$dir" $(FRESH_NOTEBOOK)

## site: the course as a website in build/site/, offline, from the notebooks replayed on every
## recorded machine (replays first when build/replay/ is missing or older than notebooks/, results/)
SITE_STAMP := $(VENV)/.installed-site
$(SITE_STAMP): $(STAMP) pyproject.toml
	$(EDITABLE) $(BIN)/python $(PIP_INSTALL) -e ".[dev,site]"
	touch $@
site: $(SITE_STAMP)
	$(BIN)/python tools/build_site.py

## site-test: build the site, then open every page in headless Chromium (screenshots in build/site-shots/)
site-test: site
	$(BIN)/python tools/site_test.py

## clean: remove build/ and the tools' caches (the virtual environment .venv stays)
clean:
	rm -rf build .pytest_cache .ruff_cache

## mutate: mutation testing of helpers/ with mutmut (not part of `make test`: about 100 mutants a
## minute on two cores; the package has about 25,000). It runs on a copy in build/mutate/ and
## prints the survivors, the score per module and overall. MUTATE narrows it to mutant names,
## e.g. MUTATE='helpers.timing.* helpers.claims.*'; SHARD=N (1-7) runs the Nth of MUTATE_SHARDS,
## each under 4,000 mutants: a CI job of 2 cores within 90 minutes, seven jobs for the package.
## test_distributed and test_collectives are not in mutmut's selection (their ranks run where
## mutmut cannot see what they reach); test_distributed_in_process reaches distributed's code in
## the test's own process (a gloo world of one rank), all but what needs NCCL or a GPU.
## SAMPLE=N mutates N mutants drawn at random (SEED=S) from the whole package instead: the
## package's score with a 95% interval, e.g. SAMPLE=3000 in about 35 minutes on two cores.
L := helpers.lessons
comma := ,
MUTATE_SHARDS := helpers.checks.*,helpers.codec.*,helpers.tables.*,helpers.claims.*,helpers.exercises.*,helpers.analysis.*,helpers.config.*,helpers.timing.*,helpers.trace.* \
    helpers.records.*,helpers.hardware.*,helpers.experiments.* \
    helpers.plotting.*,$(L).start.*,$(L).pinned.* \
    $(L).non_blocking.*,$(L).events.* \
    $(L).streams.*,$(L).peer.* \
    $(L).nccl.* \
    helpers.cli.*,helpers.distributed.*,helpers.forkserver.*
SHARD ?=
MUTATE ?= $(if $(SHARD),$(subst $(comma), ,$(word $(SHARD),$(MUTATE_SHARDS))),helpers.*)
MUTATE_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SEED ?= 0
.PHONY: mutate
mutate: $(STAMP)
	@$(BIN)/python -c "import mutmut" 2>/dev/null || $(BIN)/python -m pip install --quiet -e ".[mutate]"
	rm -rf build/mutate && mkdir -p build/mutate
	git ls-files -z | xargs -0 cp --parents -t build/mutate  # every tracked file: tests read many
ifdef SAMPLE
# mutmut lists its mutants only after a run, and refuses a filter that matches none: one small
# function's mutants set it up (they are left out of the score by --only).
	cd build/mutate && ../../$(BIN)/mutmut run 'helpers.config.x_quick_mode__mutmut_*' >mutmut-setup.log 2>&1 \
	    || (tail -c 3000 mutmut-setup.log && false)
	cd build/mutate && ../../$(BIN)/mutmut results --all true >names.txt 2>&1
	cd build/mutate && ../../$(BIN)/python ../../tools/mutation.py pick names.txt $(SAMPLE) --seed $(SEED) >sample.txt
	cd build/mutate && ../../$(BIN)/mutmut run --max-children $(MUTATE_JOBS) $$(cat sample.txt) >mutmut.log 2>&1 \
	    || (tail -c 3000 mutmut.log && false)
else
	cd build/mutate && ../../$(BIN)/mutmut run --max-children $(MUTATE_JOBS) $(foreach m,$(MUTATE),'$(m)') >mutmut.log 2>&1 \
	    || (tail -c 3000 mutmut.log && false)
endif
	cd build/mutate && ../../$(BIN)/mutmut results >survivors.txt 2>&1; grep -v ": not checked$$" survivors.txt; \
	    ../../$(BIN)/mutmut results --all true >all.txt 2>&1
	$(BIN)/python tools/mutation.py score build/mutate/all.txt $(if $(SAMPLE),--total $$(grep -c __mutmut_ build/mutate/names.txt) --only build/mutate/sample.txt)

# ---------------------------------------------------------------- GPU machines
## gpu-wheels: here, fetch the wheels a GPU machine without network lacks into .whl/ (ignored)
gpu-wheels:
	$(PYTHON) tools/gpu_wheels.py

## gpu-prepare: here, before each GPU run: note in .whl/ the commit the recordings will be made from
gpu-prepare:
	@test -d .whl || $(MAKE) gpu-wheels
	git describe --always --dirty --abbrev=12 > .whl/COMMIT
	@cat .whl/COMMIT

## gpu-all: on the GPU machine: install the carried wheels, run the GPU tests, execute every
## notebook live at full size recording results (GPU_FLAGS=--quick: a timed quick pass too),
## and pack recordings, executed notebooks and logs into OUT/gpu-results-MACHINE.tar.gz
OUT ?= build/gpu-out
SITE ?= /tmp/site
GPU_ENV := PYTHONPATH=$(SITE):$(CURDIR) COURSE_COMMIT=$$(cat .whl/COMMIT 2>/dev/null) \
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
NOTEBOOKS ?= $(wildcard notebooks/*.ipynb)
GPU_FLAGS ?=
gpu-all:
	python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
	    --target $(SITE) .whl/*.whl
	python3 tools/gpu_run.py --mark-installed $(SITE)
	mkdir -p $(OUT) build/gpu
	$(GPU_ENV) python3 tools/gpu_run.py --out $(OUT) $(GPU_FLAGS) $(NOTEBOOKS)

## gpu-check: on the GPU machine, a GPU CI's regression job: measures the headline figures
## (pinned H2D/D2H, P2P, all_reduce busbw) and fails when one falls below this machine's row in
## results/index.jsonl by more than CHECK_TOLERANCE (5%)
CHECK_TOLERANCE ?= 5%
gpu-check:
	$(GPU_ENV) $(if $(wildcard $(BIN)/python),$(BIN)/python,python3) -m helpers.cli check \
	    --tolerance $(CHECK_TOLERANCE)

## unpack: here, put a GPU run's recordings under results/ (ARCHIVE=.../gpu-results-MACHINE.tar.gz);
## it validates everything in a temporary folder first and changes nothing unless all is sound
ARCHIVE ?=
unpack: $(STAMP)
	@test -n "$(ARCHIVE)" || (echo "usage: make unpack ARCHIVE=path/to/gpu-results-MACHINE.tar.gz" && false)
	$(BIN)/python tools/gpu_run.py --unpack $(ARCHIVE)
