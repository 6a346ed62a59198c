# Set-up: validate the config before any job starts, build the plan, and name its paths.

import json

from fwbench.config import check_threads, validate
from fwbench.plan import Plan

config.update(validate(config))
check_threads(config, workflow.cores)
PLAN = Plan.from_config(config)
RESULTS = PLAN.results_dir()


wildcard_constraints:
    experiment="[a-z_]+",
    device="cpu|cuda",
    framework="pytorch|tensorflow",
    model="|".join(config["models"]),
    cell=r"[a-z]+-b\d+-[0-9x]+-[a-z0-9]+-[a-z_]+-[a-z]+",
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


def get_previous_trial(wildcards):
    """The trial planned before this one in its cell group: it must run first (interleaving)."""
    previous = PLAN.previous(_trial(wildcards))
    return {"previous": ancient(previous.path(PLAN.run))} if previous else {}


def get_trial_settings(wildcards):
    return json.dumps(PLAN.trial_settings(_trial(wildcards)), sort_keys=True)
