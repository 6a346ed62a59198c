# Host side, no framework import: every trial result into tidy parquet tables (epochs and
# confusion: the real-data experiments' records, empty when none ran).


# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule collect_tables:
    input:
        trials=get_trial_results(),
    output:
        iterations=f"{RESULTS}/tables/iterations.parquet",
        trials=f"{RESULTS}/tables/trials.parquet",
        cells=f"{RESULTS}/tables/cells.parquet",
        epochs=f"{RESULTS}/tables/epochs.parquet",
        confusion=f"{RESULTS}/tables/confusion.parquet",
    log:
        f"logs/{PLAN.run}/collect_tables.log",
    script:
        "../scripts/collect_tables.py"


# The A/A controls' trials, in tables of their own, so that no figure or analysis of the
# sweep counts them (fwbench.analysis.controls reads them).
# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule collect_controls:
    input:
        trials=get_control_results(),
    output:
        iterations=f"{RESULTS}/tables/control_iterations.parquet",
        trials=f"{RESULTS}/tables/controls.parquet",
    log:
        f"logs/{PLAN.run}/collect_controls.log",
    script:
        "../scripts/collect_tables.py"


# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule collect_profiles:
    input:
        profiles=get_profiles(),
    output:
        profiles=f"{RESULTS}/tables/profiles.parquet",
    log:
        f"logs/{PLAN.run}/collect_profiles.log",
    script:
        "../scripts/collect_profiles.py"


# The trials table by its path, not rules.collect_tables.output: Snakemake hashes a rule's whole
# input list once per file when the rule also names another rule's output (quadratic: 15 s of a
# 5,000-trial dry-run). Only the table as input: it is remade whenever a trial is, and this rule
# with it; the result paths, where the script finds the chosen trial's, are a parameter (naming
# every trial file in one aggregate only: 1 s of a 10,000-trial dry-run).
# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule collect_telemetry_trace:
    input:
        trials=f"{RESULTS}/tables/trials.parquet",
    output:
        trace=f"{RESULTS}/tables/telemetry_trace.parquet",
    log:
        f"logs/{PLAN.run}/collect_telemetry_trace.log",
    params:
        results=get_trial_results(),
    script:
        "../scripts/collect_telemetry_trace.py"
