# The README's two commands, `make run` and `make test`, and what they need.
# Both create .venv from the lock file if it is missing; both are idempotent.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
SNAKEMAKE := $(BIN)/snakemake

.PHONY: run resume test test-fast bench-harness clean-run

$(INSTALLED): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --requirement requirements.lock
	$(BIN)/pip install --quiet --no-deps --editable .
	touch $@

# Run the embedded default sweep (config.yaml), resuming whatever an interrupted run left.
run: resume

resume: $(INSTALLED)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m fwbench unlock-if-idle
	PATH=$(abspath $(BIN)):$$PATH $(SNAKEMAKE) --cores 1 --rerun-incomplete
	@echo "Report: results/default/report/report.html and report.pdf"

test: $(INSTALLED)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/pytest -q

test-fast: $(INSTALLED)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/pytest -q -m "not slow"

# Resolve every tag in containers/images.lock to the digest it points to now and write the lock
# (needs skopeo, crane or docker, and the registry); then commit it. See docs/containers.md.
.PHONY: pin-images
pin-images: $(INSTALLED)
	$(BIN)/python -m fwbench.images pin
