# llmfleet: two commands on a fresh Debian 12 machine (as root):
#   make demo   build the lab, start it, run site.yml on it, show what runs
#   make test   every test and quality gate (pytest is the runner)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
LLMFLEET := $(BIN)/llmfleet
# Tools the CLI and tests call (ansible-playbook, molecule, ...) come from the venv.
export PATH := $(abspath $(BIN)):$(PATH)
# Host packages the lab needs: rootful podman on runc, debootstrap for the node image;
# faketime for the doctor's clock test (the nodes share this machine's kernel clock, so the
# skew goes on the controller's side); rsync for model_weights_fetch_on_controller's push.
APT_PACKAGES := podman runc debootstrap iproute2 util-linux fuse-overlayfs tar openssh-client faketime rsync
CONTAINERS_CONF := /etc/containers/containers.conf.d/50-llmfleet-lab.conf
PODMAN_SETTINGS := [containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n
PYTEST_ARGS ?=
# Two workers: the test lab's tests in one, the labs of their own (molecule's) and the tests
# without a lab in the other (tests/conftest.py groups them; a run waits more on the labs'
# processes than it computes). TEST_WORKERS= runs everything in one process.
TEST_WORKERS ?= -n 2 --dist loadscope

.PHONY: help demo bench test test-extended test-fast lab-deps venv image lab-up lab-down lab-status lint dist clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

lab-deps: ## Install the host packages and podman settings the lab needs (apt, root)
	@if ! dpkg -s $(APT_PACKAGES) >/dev/null 2>&1; then \
	  echo "installing host packages: $(APT_PACKAGES)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES); \
	fi
	@install -d /etc/containers/containers.conf.d
	@# runc: crun fails on this kernel's hybrid cgroups; explicit ulimits: no CAP_SYS_RESOURCE.
	@printf '$(PODMAN_SETTINGS)' | cmp -s - $(CONTAINERS_CONF) || printf '$(PODMAN_SETTINGS)' > $(CONTAINERS_CONF)

$(VENV)/.installed: pyproject.toml lab/pyproject.toml
	@echo "creating the Python environment in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]' -e ./lab
	@touch $@

venv: $(VENV)/.installed ## Create the Python environment (ansible, molecule, linters, CLI)

image: lab-deps venv ## Build the lab node image (cached in podman's storage by recipe digest)
	$(LLMFLEET) lab build

lab-up: lab-deps venv ## Start the lab (2 nodes)
	$(LLMFLEET) lab up

lab-down: venv ## Remove the lab
	$(LLMFLEET) lab down

lab-status: venv ## Show the lab
	$(LLMFLEET) lab status

demo: lab-deps venv ## Build and start the lab, run site.yml on it; it ends with the command that starts Claude Code
	$(LLMFLEET) lab up
	$(LLMFLEET) up -i inventory/lab

bench: lab-deps venv ## Benchmark the orchestration on a fresh lab, the served endpoint, then the fault matrix; reports in artifacts/bench
	$(LLMFLEET) lab bench
	$(LLMFLEET) up -i inventory/lab
	$(LLMFLEET) bench -i inventory/lab
	$(LLMFLEET) lab faults

# The tests marked `extended` (slow, and their path walked by another test too) stay out of
# make test, which must end well within CI's 90 minutes on 2 cores; make test-extended runs them.
test: lab-deps venv ## Run every test and quality gate (but the extended ones)
	$(LLMFLEET) lab build
	$(BIN)/pytest $(TEST_WORKERS) -m "not extended" $(PYTEST_ARGS)

test-extended: lab-deps venv ## Run the extended tests (slow lab paths make test leaves out)
	$(LLMFLEET) lab build
	$(BIN)/pytest $(TEST_WORKERS) -m extended $(PYTEST_ARGS)

test-fast: venv ## Unit tests and linters only (no lab)
	$(BIN)/pytest -m "not lab" $(PYTEST_ARGS)

lint: venv ## Linters only
	$(BIN)/pytest tests/quality $(PYTEST_ARGS)

dist: venv ## Build the wheels (CLI + collection, for pipx; the lab's) and the collection tarball into dist/
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/python -m build --no-isolation --outdir dist lab
	$(BIN)/ansible-galaxy collection build --force --output-path dist

clean: ## Remove the Python environment and caches (the lab image stays cached)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .ansible
