# Set-up: validate the config before any job starts, build the plan, and name its paths.

import json

from fwbench import images
from fwbench.config import check_threads, validate
from fwbench.plan import Plan

config.update(validate(config))
PLAN = Plan.from_config(config)
check_threads(config, workflow.cores, max(PLAN.threads(t) for t in PLAN.trials))
RESULTS = PLAN.results_dir()
# With --use-singularity: each framework's image from containers/images.lock, by digest; stops
# here, before any job, when a digest is missing (the message names `make pin-images`).
IMAGES = images.workflow_images(
    config["frameworks"], requested=images.containers_requested(workflow)
)


wildcard_constraints:
    experiment="[a-z_]+",
    device="cpu|cuda",
    framework="pytorch|tensorflow",
    model="|".join(config["models"]),
    cell=r"[a-z]+-b\d+-[0-9x]+-[a-z0-9]+-[a-z_]+-[a-z_+]+(-[a-z_]+-w\d+)?",
    trial=r"\d+",


def get_trial_results():
    return PLAN.trial_paths()


def get_final_output():
    return [f"{RESULTS}/report/report.html", f"{RESULTS}/report/report.pdf"]


def _trial(wildcards):
    return PLAN.trial(
        f"{RESULTS}/cells/{wildcards.experiment}/{wildcards.device}/{wildcards.framework}"
        f"/{wildcards.model}/{wildcards.cell}/trial-{wildcards.trial}.json"
    )


def get_trial_inputs(wildcards):
    """The idle baseline (ancient: re-measuring it re-runs no trial) and the trial planned before
    this one in its cell group, which must run first (interleaving). The previous trial is not
    ancient: re-measuring it re-measures the rest of its group, so pairs stay interleaved."""
    inputs = {"idle": ancient(PLAN.idle_path())}
    if PLAN.data_path():
        inputs["data"] = ancient(PLAN.data_path())
    previous = PLAN.previous(_trial(wildcards))
    if previous:
        inputs["previous"] = previous.path(PLAN.run)
    return inputs


def get_input_shapes(wildcards):
    return sorted({tuple(s) for spec in config["models"].values() for s in spec["input_shapes"]})


def get_trial_threads(wildcards):
    return PLAN.threads(_trial(wildcards))


def get_trial_settings(wildcards):
    settings = images.with_images(PLAN.trial_settings(_trial(wildcards)), IMAGES)
    return json.dumps(settings, sort_keys=True)


def get_container(wildcards):
    """docker://<repository>@sha256:<digest> of the trial's framework; None when run natively."""
    return images.container_for(IMAGES, wildcards.framework)
