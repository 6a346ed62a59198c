# The README's two commands, `make run` and `make test`, and what they need.
# Both create .venv from the lock file if it is missing; both are idempotent.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: run resume rebuild test test-fast test-tools test-slurm bench-harness bench-telemetry

$(INSTALLED): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --requirement requirements.lock
	$(BIN)/pip install --quiet --no-deps --editable .
	touch $@

# Run the embedded default sweep (config.yaml; PRESET=<name>: presets/<name>.yaml alone),
# resuming whatever an interrupted run left: `fwbench run` checks the machine first (fwbench
# doctor), never writes into a shipped run's folder, rewrites results/index.html, and names the
# folder it wrote on its last line. ARGS: more Snakemake arguments.
run: resume

resume: $(INSTALLED)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m fwbench run \
		$(if $(PRESET),--preset $(PRESET)) $(if $(ARGS),-- $(ARGS))

# What a run needs and what would disturb it, checked on this machine (`make run` does it first).
.PHONY: doctor
doctor: $(INSTALLED)
	$(BIN)/python -m fwbench doctor

# Tables, statistics, figures and report of every shipped run (a results/<run>/ folder with the
# checksums of its rebuild, rebuild.sha256), each from its cell files alone, then the index of
# runs; `make rebuild-<run>` rebuilds one.
SHIPPED := $(patsubst results/%/rebuild.sha256,%,$(wildcard results/*/rebuild.sha256))
.PHONY: $(SHIPPED:%=rebuild-%)
rebuild: $(SHIPPED:%=rebuild-%)
	$(BIN)/python -m fwbench index
	@echo "Rebuilt $(SHIPPED:%=results/%/) (each one's report/report.html and report.pdf); every run: results/index.html"

$(SHIPPED:%=rebuild-%): rebuild-%: $(INSTALLED)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m fwbench rebuild results/$*
	@echo "Rebuilt results/$*/: report/report.html and report.pdf"

# The whole suite in worker processes, one per core up to 4 (each test stays in one process;
# its largest test holds ~10 GB). Tests of one xdist_group share a worker, and so a fixture: the
# reference run rebuilt once (tests/conftest.py).
PYTEST := PATH=$(abspath $(BIN)):$$PATH $(BIN)/pytest -q --numprocesses auto --maxprocesses 4 \
	--dist loadgroup $(PYTEST_ARGS)

# Every test but the deep networks' equivalence proofs (`make test-deep`, which CI runs too):
# within 15 minutes on 2 cores.
test: $(INSTALLED) test-tools
	$(PYTEST) -m "not deep"

# The deep networks (resnet152, efficientnet_b4, mobilenet_v2, resnet18_cifar, ...) proven equal
# in both frameworks: parameter counts, outputs and training in float64 and float32 (up to a
# minute of CPU each; they change only with the model zoo).
.PHONY: test-deep
test-deep: $(INSTALLED)
	$(PYTEST) -m deep

# The report's reader checks render the PDF (pdftoppm) and open the HTML (chromium); they skip,
# naming the package, where these cannot be installed (no root or no apt). The reference's PDF
# rebuilds byte for byte only with HarfBuzz-Subset's font subsets (docs/report.md).
test-tools:
	@if command -v pdftoppm >/dev/null && command -v chromium >/dev/null \
		&& PATH=$$PATH:/sbin:/usr/sbin ldconfig -p | grep -q libharfbuzz-subset.so.0; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq poppler-utils chromium libharfbuzz-subset0 >/dev/null; \
	else echo "poppler-utils, chromium or libharfbuzz-subset0 is missing: the report's reader checks will skip, and the reference's PDF will not rebuild byte for byte"; fi

# The workflow through Snakemake's SLURM executor on a single-node cluster started here from
# Debian's packages (needs root; over 2 minutes on 2 cores, so not part of `make test`).
test-slurm: $(INSTALLED)
	scripts/slurm/install.sh && scripts/slurm/start.sh
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/pytest -q tests/test_slurm.py; s=$$?; scripts/slurm/stop.sh; exit $$s

# Harness against a bare loop, interleaved in one run (goal: ratio <= 1.01 on the CPU).
bench-harness: $(INSTALLED)
	$(BIN)/python benchmarks/harness_overhead.py --blocks 200 --iterations 50

# A CPU trial with the telemetry sampler on and off, interleaved (goal: ratio <= 1.02).
bench-telemetry: $(INSTALLED)
	$(BIN)/python benchmarks/telemetry_overhead.py --blocks 20

# Snakemake's dry-run time and peak memory for plans of ~1,000, 5,000 and 10,000 trials, and a
# no-op re-run of a finished 1,000-trial run (goals: 10,000 trials and the no-op in <= 10 s each).
.PHONY: bench-plan
bench-plan: $(INSTALLED)
	$(BIN)/python benchmarks/plan_scaling.py --sizes 1000 5000 10000 --noop 1000

# fwbench's mean time per step against PyTorch's torch.utils.benchmark.Timer and TensorFlow's
# timeit around its own tf.function, windows of each alternating in one fresh process per cell
# and round (goal: every ratio in [0.9, 1.1]).
.PHONY: bench-external
bench-external: $(INSTALLED)
	$(BIN)/python benchmarks/external_timer.py --rounds 6

# Pairs of trials as the pipeline runs them (one process after the other) against pairs whose
# two processes take turns timing windows: the spread of the per-pair log ratios in each design,
# whether taking turns measures the same ratio, and the re-warm after a switch, step by step.
.PHONY: bench-pairs
bench-pairs: $(INSTALLED)
	$(BIN)/python benchmarks/interleaved_pairs.py --pairs 16 --rewarm 10

# A/A controls: the same cell in both slots of 20 pairs per framework, as trials run now and
# taking turns in an order drawn per round; how often a design calls the same thing different,
# what the waiting process does, and the re-warm after a switch (docs/statistics.md).
.PHONY: bench-aa
bench-aa: $(INSTALLED)
	$(BIN)/python benchmarks/aa_pairs.py --pairs 20 --cells lenet5/infer

# The plan's sizing rule on noise resampled from the shipped runs, with and without a one-sided
# slow mode: false "faster" rates per comparison and family, and the power it promised
# (families of 3, 4 and 15; noise 5-17 %; docs/statistics.md, "Enough pairs").
.PHONY: bench-sizing
bench-sizing: $(INSTALLED)
	$(BIN)/python benchmarks/sizing.py --families 200

# `fwbench compare --fail-on-slowdown 10` by simulation: its false FAIL rate, its power at true
# ratios 1.1-1.3 and each cell's detectable slowdown, 8 cells of 8 trials a side (docs/compare.md).
.PHONY: bench-gate
bench-gate: $(INSTALLED)
	$(BIN)/python benchmarks/compare_gate.py --families 2000

# A trial of each framework through Snakemake, by stage (goal: <= 1 s beyond import and measurement).
.PHONY: bench-trial
bench-trial: $(INSTALLED)
	$(BIN)/python benchmarks/trial_stages.py --trials 3

test-fast: $(INSTALLED)
	$(PYTEST) -m "not slow"

# Build both framework images here, with the engine this machine has (Apptainer, Podman or
# Docker), from a hash-checked wheelhouse, and lock their digests in containers/build/images.lock:
# `snakemake --cores 1 --use-singularity` then runs them, with no registry. Options:
# ENGINE=apptainer|podman|docker, VARIANT=cuda|cpu (default: cuda where nvidia-smi answers),
# BASE=<base image> with IMAGE_PYTHON=<its python3>, INDEX_URL=<index> instead of the wheelhouse.
.PHONY: images test-containers
ENGINE ?= auto
VARIANT ?= auto
images: $(INSTALLED)
	$(BIN)/python containers/build.py --engine $(ENGINE) --variant $(VARIANT) \
		$(if $(BASE),--base $(BASE)) $(if $(IMAGE_PYTHON),--python $(IMAGE_PYTHON)) \
		$(if $(INDEX_URL),--index-url $(INDEX_URL))

# The images once (`make images` when containers/build/images.lock is missing; run it again to
# rebuild them), then the default sweep (config.yaml; PRESET=<name>: a preset) with every
# benchmark job in its framework's image: with Apptainer as it is, without it through
# scripts/containers/apptainer, a shim that answers Snakemake's apptainer calls with `podman
# run` (`docker run` with ENGINE=docker, or where Podman is missing) and finds by itself the
# limits the engine accepts. ARGS: more Snakemake arguments, for example
# ARGS="--config 'devices=[cpu,cuda]'" on a GPU machine. Runs and resumes like `make run`
# (`fwbench run --use-singularity`), and names the folder it wrote on its last line.
.PHONY: run-containers
IMAGES_LOCK := containers/build/images.lock
$(IMAGES_LOCK):
	$(MAKE) images
run-containers: $(INSTALLED) $(IMAGES_LOCK)
	$(if $(shell command -v apptainer),,PATH=$(abspath scripts/containers):$$PATH) \
	$(if $(filter docker,$(ENGINE)),APPTAINER_SHIM_ENGINE=docker) \
		$(BIN)/python -m fwbench run $(if $(PRESET),--preset $(PRESET)) -- --use-singularity $(ARGS)

# Both images built here with Podman on a stand-in Debian base, checked inside, and the workflow
# run in them through an apptainer-on-podman shim, `make run-containers` from a fresh clone
# included (needs root; not part of `make test`).
test-containers: $(INSTALLED)
	scripts/containers/test.sh

# Both CUDA images built here with Podman on the same stand-in base, and audited without a GPU:
# their CUDA stack against their locks and labels, the driver each needs, "no GPU" in one line,
# and a second --no-cache build giving the same digests (needs root; not part of `make test`).
.PHONY: test-cuda-images
test-cuda-images: $(INSTALLED)
	scripts/containers/test_cuda.sh

# Resolve every tag in containers/images.lock to the digest it points to now and write the lock
# (needs skopeo, crane or docker, and the registry); then commit it. See docs/containers.md.
.PHONY: pin-images
pin-images: $(INSTALLED)
	$(BIN)/python -m fwbench pin-images

# Lint: ruff (rules in pyproject.toml), snakefmt --check, and snakemake --lint, whose findings
# the workflow keeps on purpose each carry a `lint-ok` comment saying why
# (scripts/lint_workflow.py). Runs all three, then fails if any failed.
.PHONY: lint
lint: $(INSTALLED)
	@status=0; \
	$(BIN)/ruff check --output-format concise . || status=1; \
	$(BIN)/snakefmt --check --compact-diff Snakefile rules/ || status=1; \
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python scripts/lint_workflow.py || status=1; \
	exit $$status
