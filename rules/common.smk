# Set-up: validate the config before any job starts, build the plan, and name its paths.

import gc
import json
import os
from dataclasses import replace

from fwbench.environment import images
from fwbench.measure.gpu_host import refuse_cuda_without_gpu
from fwbench.plan.config import check_threads, save, validate
from fwbench.plan.sweep import Plan
from fwbench.workflow.failures import print_failures
from fwbench.workflow.host import baseline_numpy, own_python_first
from fwbench.workflow.progress import write_planned
from fwbench.workflow.rebuild import RUN_CONFIG

# Planning a sweep makes millions of long-lived objects (Snakemake's jobs and files, the plan).
# Python's full collections walk them all again each time the heap grows by a quarter, and free
# next to nothing: 12 of them took 3.7 s of a 10,000-trial dry-run. A full collection now waits
# for 1,000 collections of the middle generation instead of 10 (planning 10,000 trials makes
# about 290); young garbage is collected as before.
gc.set_threshold(*gc.get_threshold()[:2], 1000)

config.update(validate(config))
PLAN = Plan.from_config(config)
check_threads(config, workflow.cores, max(PLAN.threads(t) for t in PLAN.trials))
RESULTS = PLAN.results_dir()
# With --use-singularity, each framework's image from containers/images.lock, by digest; stops
# here, before any job, when a digest is missing (the message names `make pin-images`).
IMAGES = images.workflow_images(
    config["frameworks"], requested=images.containers_requested(workflow)
)


# Host jobs' `python -m fwbench` is this workflow's own interpreter, whatever PATH held when
# Snakemake started (`.venv/bin/snakemake` with the environment not activated).
own_python_first(os.environ)
# Host jobs compute with numpy's baseline kernels, so a rebuild gives the same bytes on any
# x86-64 processor (fwbench.workflow.host.baseline_numpy); trials drop it again.
baseline_numpy(os.environ)


# When jobs are about to run (never in a dry-run): a config with CUDA trials still to measure is
# refused, before any job, when no GPU is visible here (fwbench.measure.gpu_host; only where the
# jobs run here: a cluster's nodes are not this host's); then the resolved config, whose
# `statistics` block is the analysis plan, into results/<run>/config.yaml, from which the run
# rebuilds wherever its folder goes; and the planned trials, for the progress line each trial
# job prints.
onstart:
    if workflow.local_exec and not workflow.touch:
        refuse_cuda_without_gpu(
            t.cell.device for t in PLAN.trials if not os.path.exists(t.path(PLAN.run))
        )
    save(config, f"{RESULTS}/{RUN_CONFIG}")
    write_planned(PLAN.trial_paths(), RESULTS)


# A failed job's cause, read from its log, as the last lines on the terminal.
onerror:
    print_failures(log)


# From the planned cells and the code that names them (fwbench.plan.cells), so no path the plan
# names can fall outside them.
wildcard_constraints:
    **PLAN.wildcard_constraints(),


def get_trial_results():
    return PLAN.trial_paths(controls=False)


def get_control_results():
    """The A/A controls' trials (config `controls`): tables and statistics of their own."""
    return PLAN.trial_paths(controls=True)


def get_controls_table(wildcards):
    """stats/controls.csv and the controls' trials, for the report, where the run has A/A
    controls."""
    if not config["controls"]:
        return {}
    return {
        "controls": f"{RESULTS}/stats/controls.csv",
        "control_trials": rules.collect_controls.output.trials,
    }


def get_gate_controls(wildcards):
    """The A/A controls and their trials, for the gate's checks of every trial."""
    if not config["controls"]:
        return {}
    return {
        **get_controls_table(wildcards),
        "control_trials": f"{RESULTS}/tables/controls.parquet",
    }


def get_profiles():
    """One profiled run per cell when `profiling` is configured, else none."""
    if not config["profiling"]:
        return []
    return [PLAN.profile_path(cell) for cell in PLAN.cells()]


def _cell(wildcards):
    return _trial({**wildcards, "trial": "1"}).cell


def get_last_trial(wildcards):
    """The profiled run follows the cell's trials, so it never overlaps a timed one."""
    return PLAN.last_trial(_cell(wildcards)).path(PLAN.run)


def get_profile_settings(wildcards):
    trial = PLAN.last_trial(_cell(wildcards))
    settings = replace(PLAN.trial_settings(trial), profile_steps=config["profiling"]["steps"])
    return json.dumps(settings.to_dict(), sort_keys=True)


def get_final_output():
    return [f"{RESULTS}/report/report.html", f"{RESULTS}/report/report.pdf"]


def _trial(wildcards):
    w = dict(wildcards)
    return PLAN.trial(
        f"{RESULTS}/cells/{w['experiment']}/{w['device']}/{w['framework']}/"
        f"{w['model']}/{w['cell']}/trial-{w['trial']}.json"
    )


def get_data_record():
    """The record of the verified data set, for the experiments that read one (ancient:
    re-verifying it re-runs no trial)."""
    return [ancient(PLAN.data_path())] if PLAN.data_path() else []


def get_trial_predecessor(wildcards):
    """What a trial job waits for. A second member of a pair: the first, which runs first, and
    re-measuring it re-measures this one. Any other trial: the idle baseline (ancient:
    re-measuring it re-runs no trial), so it is measured before every trial, the second members
    waiting for it through their partners; naming it on half the trials only saves planning.
    And the warm-up records of its whole cell group, so both cells' calibrations are done
    before a pair starts. No first member waits for another trial (its place in the order is
    its priority), so re-measuring one pair re-measures no other."""
    trial = _trial(wildcards)
    partner = PLAN.partner_before(trial)
    if partner:
        return partner.path(PLAN.run)
    return [ancient(PLAN.idle_path()), *PLAN.group_warmup_paths(trial)]


def get_warmup_record(wildcards):
    """The cell's warm-up record, which fixes the steps its trials warm up (fwbench trial
    --warmup); none for the real-data experiments, which time whole runs."""
    path = PLAN.warmup_path(_trial(wildcards).cell)
    return [path] if path else []


def get_calibration_settings(wildcards):
    settings = images.with_images(PLAN.calibration_settings(_cell(wildcards)), IMAGES)
    return json.dumps(settings.to_dict(), sort_keys=True)


def get_calibration_paths(wildcards):
    """The results of the cell's calibration trials, which fix its warm-up together."""
    cell = _cell(wildcards)
    return [PLAN.calibration_path(cell, name=name) for name in PLAN.calibration_names(cell)]


def get_calibration_priority(wildcards):
    """Just above the first trial of the cell's group (Plan.calibration_priority)."""
    return PLAN.calibration_priority(_cell(wildcards))


def get_calibration_threads(wildcards):
    return PLAN.threads(PLAN.last_trial(_cell(wildcards)))


def get_pair_group(wildcards):
    """Both members of the trial's pair in one cluster job (Plan.pair_group)."""
    return PLAN.pair_group(_trial(wildcards))


def get_trial_priority(wildcards):
    """Second members of pairs before any other job, then the planned order (Plan.priority)."""
    return PLAN.priority(_trial(wildcards))


def get_data_settings(wildcards):
    """The config's data block and every input shape of the sweep, for prepare_data."""
    shapes = sorted({tuple(s) for spec in config["models"].values() for s in spec["input_shapes"]})
    return json.dumps({"data": config["data"], "shapes": shapes}, sort_keys=True)


def get_trial_threads(wildcards):
    return PLAN.threads(_trial(wildcards))


def get_trial_settings(wildcards):
    settings = images.with_images(PLAN.trial_settings(_trial(wildcards)), IMAGES)
    return json.dumps(settings.to_dict(), sort_keys=True)


def get_container(wildcards):
    """docker://<repository>@sha256:<digest> of the trial's framework; None when run natively."""
    return images.container_for(IMAGES, wildcards.framework)
