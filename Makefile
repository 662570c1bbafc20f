# Every command a user, an instructor or CI runs. The two that matter:
#   make run    set up if needed, then execute every notebook into build/notebooks/
#   make test   set up if needed, then lint, unit tests, and every notebook (quick mode)
# On a lent GPU machine without network: `make gpu-all OUT=folder` (see README).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
comma  := ,
# The torch build: PyPI's default (CUDA) build where an NVIDIA driver is present, otherwise
# the CPU build 2.13.0. Override with e.g. `make TORCH_SPEC='torch==2.11.0' test`.
TORCH_SPEC ?= $(if $(shell command -v nvidia-smi 2>/dev/null),torch>=2.11$(comma)<2.15,torch==2.13.0)
# Notebooks run two at a time on a machine without a GPU (CI has two cores), one at a time
# where a GPU is measured (two notebooks timing the same GPU would disturb each other).
JOBS ?= $(if $(shell command -v nvidia-smi 2>/dev/null),1,2)

.PHONY: setup run test replay-all index lab lint unit notebooks clean gpu-wheels gpu-prepare gpu-all unpack

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

## run: execute every notebook (live where the hardware is, replaying elsewhere), with outputs
run: $(STAMP)
	rm -rf build/notebooks && mkdir -p build/notebooks
	cp notebooks/*.ipynb build/notebooks/
	$(BIN)/pytest -p no:cacheprovider -q -n $(JOBS) --nbmake --overwrite \
	    --nbmake-timeout=1200 build/notebooks
	@echo "Executed notebooks, with their outputs: build/notebooks/ (open them with 'make lab')"

## test: ruff, the unit tests, every notebook in quick mode (replaying where needed), then the
## truth check: every notebook replayed on every recorded machine, its checks and verdicts
## against its numbers, results/index.jsonl current (tools/replay_all.py)
test: $(STAMP)
	$(BIN)/ruff check .
	COURSE_QUICK=1 $(BIN)/pytest -q -n $(JOBS) -m "not gpu and not gpu2" --durations=10 \
	    --nbmake --nbmake-timeout=300 tests notebooks
	$(BIN)/python tools/replay_all.py

## replay-all: only the truth check of `make test`: every notebook replayed on every recorded
## machine (executed copies in build/replay/<machine>/), checks, verdicts, index current
replay-all: $(STAMP)
	$(BIN)/python tools/replay_all.py

## index: rewrite results/index.jsonl (figures from the recordings, verdicts from the replays)
index: $(STAMP)
	$(BIN)/python tools/replay_all.py --write

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

clean:
	rm -rf build .pytest_cache .ruff_cache

# ---------------------------------------------------------------- GPU machines
# Here: fetch the wheels the GPU machines lack into .whl/ (ignored; carried by the device tool).
gpu-wheels:
	$(PYTHON) tools/gpu_wheels.py

# Here, before each device run: note the commit the recordings will be made from.
gpu-prepare:
	@test -d .whl || $(MAKE) gpu-wheels
	git describe --always --dirty --abbrev=12 > .whl/COMMIT
	@cat .whl/COMMIT

# There: install the carried wheels, run the GPU tests, execute every notebook live at full
# size recording results, and pack recordings + executed notebooks + logs into $(OUT).
OUT ?= build/gpu-out
SITE ?= /tmp/site
GPU_ENV := PYTHONPATH=$(SITE):$(CURDIR) COURSE_COMMIT=$$(cat .whl/COMMIT 2>/dev/null) \
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
NOTEBOOKS ?= $(wildcard notebooks/*.ipynb)
GPU_FLAGS ?=
gpu-all:
	python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
	    --target $(SITE) .whl/*.whl
	mkdir -p $(OUT) build/gpu
	$(GPU_ENV) python3 tools/gpu_run.py --out $(OUT) $(GPU_FLAGS) $(NOTEBOOKS)

# Here: put the recordings from a GPU run's archive under results/.
ARCHIVE ?=
# It validates everything in a temporary folder first and changes nothing unless all is sound.
unpack: $(STAMP)
	@test -n "$(ARCHIVE)" || (echo "usage: make unpack ARCHIVE=path/to/gpu-results-MACHINE.tar.gz" && false)
	$(BIN)/python tools/gpu_run.py --unpack $(ARCHIVE)
