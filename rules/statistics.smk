# Host side: summaries per cell, PyTorch/TensorFlow comparisons per matched pair, tests, peak
# memory and latency percentiles;
# the distributed experiment's scaling and strategy comparisons; achieved FLOP/s per cell.


rule summarise_results:
    input:
        iterations=rules.collect_tables.output.iterations,
        trials=rules.collect_tables.output.trials,
    output:
        cells=f"{RESULTS}/stats/cells.csv",
        comparisons=f"{RESULTS}/stats/comparisons.csv",
        tests=f"{RESULTS}/stats/tests.csv",
        memory=f"{RESULTS}/stats/memory.csv",
        memory_comparisons=f"{RESULTS}/stats/memory_comparisons.csv",
        latency=f"{RESULTS}/stats/latency.csv",
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


rule summarise_distributed:
    input:
        trials=rules.collect_tables.output.trials,
    output:
        scaling=f"{RESULTS}/stats/scaling.csv",
        strategies=f"{RESULTS}/stats/strategies.csv",
    log:
        f"logs/{PLAN.run}/summarise_distributed.log",
    params:
        statistics=lookup(dpath="statistics", within=config),
    script:
        "../scripts/summarise_distributed.py"


rule summarise_flops:
    input:
        cells=rules.summarise_results.output.cells,
        trials=rules.collect_tables.output.trials,
    output:
        flops=f"{RESULTS}/stats/flops.csv",
    log:
        f"logs/{PLAN.run}/summarise_flops.log",
    params:
        models=lookup(dpath="models", within=config),
        peak_flops=lookup(dpath="peak_flops", within=config),
    script:
        "../scripts/summarise_flops.py"
