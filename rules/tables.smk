# Host side, no framework import: every trial result into tidy parquet tables.


rule collect_tables:
    input:
        trials=get_trial_results(),
    output:
        iterations=f"{RESULTS}/tables/iterations.parquet",
        trials=f"{RESULTS}/tables/trials.parquet",
        cells=f"{RESULTS}/tables/cells.parquet",
    log:
        f"logs/{PLAN.run}/collect_tables.log",
    script:
        "../scripts/collect_tables.py"


rule collect_profiles:
    input:
        profiles=get_profiles(),
    output:
        profiles=f"{RESULTS}/tables/profiles.parquet",
    log:
        f"logs/{PLAN.run}/collect_profiles.log",
    script:
        "../scripts/collect_profiles.py"
