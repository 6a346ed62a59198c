# Host side, under the analysis plan (the config's `statistics` block, passed whole): summaries
# per cell, PyTorch/TensorFlow comparisons per matched pair with their sensitivity analysis, the
# trials' quality classes, tests, peak memory, latency percentiles and the plan itself;
# the distributed experiment's scaling and strategy comparisons; achieved FLOP/s per cell; the
# gate a run passes before it ships.


# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule summarise_results:
    input:
        iterations=rules.collect_tables.output.iterations,
        trials=rules.collect_tables.output.trials,
    output:
        cells=report(
            f"{RESULTS}/stats/cells.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Time, memory and latency",
        ),
        comparisons=report(
            f"{RESULTS}/stats/comparisons.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Time, memory and latency",
        ),
        tests=report(
            f"{RESULTS}/stats/tests.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Time, memory and latency",
        ),
        memory=report(
            f"{RESULTS}/stats/memory.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Time, memory and latency",
        ),
        memory_comparisons=report(
            f"{RESULTS}/stats/memory_comparisons.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Time, memory and latency",
        ),
        latency=report(
            f"{RESULTS}/stats/latency.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Time, memory and latency",
        ),
        sensitivity=report(
            f"{RESULTS}/stats/sensitivity.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Time, memory and latency",
        ),
        quality=report(
            f"{RESULTS}/stats/quality.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Time, memory and latency",
        ),
        plan=report(
            f"{RESULTS}/stats/plan.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Time, memory and latency",
        ),
    log:
        f"logs/{PLAN.run}/summarise_results.log",
    params:
        seed=lookup(dpath="seed", within=config),
        statistics=lookup(dpath="statistics", within=config),
    script:
        "../scripts/summarise_results.py"


# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule summarise_ablation:
    input:
        trials=rules.collect_tables.output.trials,
    output:
        ablation=report(
            f"{RESULTS}/stats/ablation.csv",
            caption="../report/captions/ablation.rst",
            category="Tables",
            subcategory="Ablation",
        ),
        gaps=report(
            f"{RESULTS}/stats/gaps.csv",
            caption="../report/captions/ablation.rst",
            category="Tables",
            subcategory="Ablation",
        ),
    log:
        f"logs/{PLAN.run}/summarise_ablation.log",
    params:
        ablation=lookup(dpath="ablation", within=config),
        seed=lookup(dpath="seed", within=config),
        statistics=lookup(dpath="statistics", within=config),
    script:
        "../scripts/summarise_ablation.py"


# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule summarise_distributed:
    input:
        trials=rules.collect_tables.output.trials,
    output:
        scaling=report(
            f"{RESULTS}/stats/scaling.csv",
            caption="../report/captions/distributed.rst",
            category="Tables",
            subcategory="Distributed",
        ),
        strategies=report(
            f"{RESULTS}/stats/strategies.csv",
            caption="../report/captions/distributed.rst",
            category="Tables",
            subcategory="Distributed",
        ),
    log:
        f"logs/{PLAN.run}/summarise_distributed.log",
    params:
        statistics=lookup(dpath="statistics", within=config),
    script:
        "../scripts/summarise_distributed.py"


# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule summarise_flops:
    input:
        cells=rules.summarise_results.output.cells,
        trials=rules.collect_tables.output.trials,
    output:
        flops=report(
            f"{RESULTS}/stats/flops.csv",
            caption="../report/captions/flops.rst",
            category="Tables",
            subcategory="FLOP/s",
        ),
    log:
        f"logs/{PLAN.run}/summarise_flops.log",
    params:
        models=lookup(dpath="models", within=config),
        peak_flops=lookup(dpath="peak_flops", within=config),
    script:
        "../scripts/summarise_flops.py"


# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule summarise_controls:
    input:
        trials=rules.collect_controls.output.trials,
        iterations=rules.collect_controls.output.iterations,
    output:
        controls=report(
            f"{RESULTS}/stats/controls.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Shipping gate",
        ),
    log:
        f"logs/{PLAN.run}/summarise_controls.log",
    params:
        seed=lookup(dpath="seed", within=config),
        statistics=lookup(dpath="statistics", within=config),
    script:
        "../scripts/summarise_controls.py"


# The gate a run passes before it ships (fwbench.analysis.gate): one version of what measures,
# one processor kind, quiet trials, A/A controls, decided headline comparisons.
# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule check_gate:
    input:
        unpack(get_gate_controls),
        trials=rules.collect_tables.output.trials,
        comparisons=rules.summarise_results.output.comparisons,
    output:
        gate=report(
            f"{RESULTS}/stats/gate.csv",
            caption="../report/captions/statistics.rst",
            category="Tables",
            subcategory="Shipping gate",
        ),
    log:
        f"logs/{PLAN.run}/check_gate.log",
    params:
        statistics=lookup(dpath="statistics", within=config),
    script:
        "../scripts/check_gate.py"
