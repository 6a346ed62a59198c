# Host side: summaries per cell, PyTorch/TensorFlow comparisons per matched pair, tests.


rule summarise_results:
    input:
        iterations=rules.collect_tables.output.iterations,
        trials=rules.collect_tables.output.trials,
    output:
        cells=f"{RESULTS}/stats/cells.csv",
        comparisons=f"{RESULTS}/stats/comparisons.csv",
        tests=f"{RESULTS}/stats/tests.csv",
    log:
        f"logs/{PLAN.run}/summarise_results.log",
    params:
        seed=lookup(dpath="seed", within=config),
        statistics=lookup(dpath="statistics", within=config),
    script:
        "../scripts/summarise_results.py"


rule summarise_ablation:
    input:
        trials=rules.collect_tables.output.trials,
    output:
        ablation=f"{RESULTS}/stats/ablation.csv",
        gaps=f"{RESULTS}/stats/gaps.csv",
    log:
        f"logs/{PLAN.run}/summarise_ablation.log",
    params:
        ablation=lookup(dpath="ablation", within=config),
        seed=lookup(dpath="seed", within=config),
        statistics=lookup(dpath="statistics", within=config),
    script:
        "../scripts/summarise_ablation.py"
