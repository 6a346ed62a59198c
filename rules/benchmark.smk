# The idle baseline once; per cell, a calibration trial and the warm-up it fixes; then one job
# per trial: a supervised fresh process measures one cell and writes its result, provenance and
# telemetry side files. Trial k of the two frameworks of a cell run back to back: the second
# waits for the first and outranks every other job; a group's calibrations run before its
# first trial.


# Calls fwbench.measure.trial.measure_idle_baseline (through `fwbench idle`, fwbench.jobs).
# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule measure_idle:
    output:
        idle=PLAN.idle_path(),
    log:
        f"logs/{PLAN.run}/measure_idle.log",
    params:
        duration=lookup(dpath="telemetry/idle_s", within=config),
        period=lookup(dpath="telemetry/period_s", within=config),
    shell:
        "python -m fwbench idle --out {output.idle} --duration {params.duration}"
        " --period {params.period} > {log} 2>&1"


# Calls fwbench.measure.data.prepare_data (through `fwbench prepare-data`, fwbench.jobs). A
# command, not a script, for the reason fix_warmup gives.
# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule prepare_data:
    output:
        record=f"{RESULTS}/environment/data.json",
    log:
        f"logs/{PLAN.run}/prepare_data.log",
    params:
        settings=get_data_settings,
    shell:
        "python -m fwbench prepare-data --settings {params.settings:q} --out {output.record}"
        " > {log} 2>&1"


# A trial of the cell timing single steps only, in a fresh process like every trial; a cell runs
# `warmup.calibrations` of them (calibration, calibration-2, ...): where their steps settle fixes
# the warm-up of all its trials.
# Calls fwbench.measure.trial.run_trial (through `fwbench trial`, fwbench.jobs), with the cell's
# calibration settings.
rule calibrate_cell:
    input:
        idle=ancient(PLAN.idle_path()),
    output:
        result=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/{{calibration}}.json",
        env=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/{{calibration}}.env.json",
        telemetry=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/{{calibration}}.telemetry.csv",
        sidecar=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/{{calibration}}.telemetry.json",
    log:
        f"logs/{PLAN.run}/calibrate_cell/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/{{calibration}}.log",
    priority: get_calibration_priority
    container:
        get_container
    threads: get_calibration_threads
    resources:
        benchmark_slot=1,
    params:
        settings=get_calibration_settings,
    shell:
        "exec python -m fwbench trial --settings {params.settings:q} --result {output.result}"
        " --env {output.env} --telemetry {output.telemetry} --idle {input.idle}"
        " --job-started=$EPOCHREALTIME > {log} 2>&1"


# Host side: the changepoint analysis of the calibrations' steps (fwbench.analysis.steady_state)
# and the warm-up it fixes (fwbench.measure.calibration.fix_warmup), through `fwbench
# fix-warmup`. It takes the benchmark slot, so it never runs beside a timed trial. A command,
# not a script: Snakemake reruns a script's rule whenever the script file is newer than the
# output, as every file of a fresh clone is, and every trial after it would be measured again.
# Calls fwbench.analysis.steady_state.fixed_warmup (through `fwbench fix-warmup`, fwbench.jobs).
# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule fix_warmup:
    input:
        calibrations=get_calibration_paths,
    output:
        warmup=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/warmup.json",
    log:
        f"logs/{PLAN.run}/fix_warmup/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}.log",
    priority: get_calibration_priority
    resources:
        benchmark_slot=1,
    params:
        warmup=lookup(dpath="warmup", within=config),
        max_s=lambda wildcards: config["warmup"].get("max_s") or 0,
    shell:
        "python -m fwbench fix-warmup --calibration {input.calibrations} --out {output.warmup}"
        " --min {params.warmup[min]} --max {params.warmup[max]} --max-s {params.max_s}"
        " > {log} 2>&1"


# Calls fwbench.measure.trial.run_trial (through `fwbench trial`, fwbench.jobs).
rule run_trial:
    input:
        data=get_data_record(),
        warmup=get_warmup_record,
        after=get_trial_predecessor,
    output:
        result=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/trial-{{trial}}.json",
        env=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/trial-{{trial}}.env.json",
        telemetry=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/trial-{{trial}}.telemetry.csv",
        sidecar=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/trial-{{trial}}.telemetry.json",
    log:
        f"logs/{PLAN.run}/run_trial/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/trial-{{trial}}.log",
    priority: get_trial_priority
    # On a cluster the pair is one job, on one node (Plan.pair_group); a local run ignores it.
    group:
        get_pair_group
    container:
        get_container
    threads: get_trial_threads
    resources:
        benchmark_slot=1,
    # The idle baseline's path, though only trials that wait for it name it as input.
    params:
        settings=get_trial_settings,
        idle=PLAN.idle_path(),
    # Its output goes to the log; its progress line (fwbench.workflow) to the terminal, fd 3.
    # $EPOCHREALTIME: when bash ran this line, the start of the trial's timeline (in the log).
    shell:
        "FWBENCH_PROGRESS_FD=3 exec python -m fwbench trial --settings {params.settings:q}"
        " --result {output.result} --env {output.env} --telemetry {output.telemetry}"
        " --idle {params.idle} --warmup={input.warmup:q} --job-started=$EPOCHREALTIME"
        " 3>&2 > {log} 2>&1"


# Calls fwbench.measure.profiling.run_profile (through its main).
rule profile_cell:
    input:
        last_trial=get_last_trial,
    output:
        profile=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/profile.json",
    log:
        f"logs/{PLAN.run}/profile_cell/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}.log",
    container:
        get_container
    resources:
        benchmark_slot=1,
    params:
        settings=get_profile_settings,
    shell:
        "exec python -m fwbench.measure.profiling --settings {params.settings:q} --out {output.profile}"
        " > {log} 2>&1"
