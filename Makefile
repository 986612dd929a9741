# The two entry points of the README. Both set up first (idempotent, quick when done).
.PHONY: setup run test repro pull lint
SHELL := /bin/bash
export PATH := $(CURDIR)/.venv/bin:$(PATH)
export DVC_NO_ANALYTICS := 1
CORES ?= all

setup:
	@bash scripts/setup.sh

## run: the default study (params.yaml) through snakemake; results in results/studies/default/
## (summary.md, results.db; the tables and figures with captions in report.html)
run: setup
	bash scripts/snakemake.sh --cores $(CORES)

## test: unit and end-to-end tests, ruff and snakemake --lint, over TEST_WORKERS processes (pytest-xdist;
## a test module's tests stay in one process, so its module fixtures are built once)
TEST_WORKERS ?= 2
test: setup
	python -m pytest -n $(TEST_WORKERS) --dist loadfile

## repro: the same study through DVC (needs a git checkout), holding the project lock from the start
## (csbench.lock: refused, naming the driver, while snakemake or a pull works here)
repro: setup
	csbench validate --check-sources && python -m csbench.lock run --kind dvc -- dvc repro

## pull: a study's outputs from the DVC remote instead of recomputing them (REMOTE=name: not the
## default remote); afterwards `make run` and `make repro` find nothing to do (scripts/pull.sh)
pull: setup
	bash scripts/pull.sh $(if $(REMOTE),--remote $(REMOTE))

lint: setup
	ruff check . && snakemake --lint --cores 1
