# Host side: figures and the paper, HTML and PDF from one template, and the run's README (its
# machine, load, dates and the claims it can judge). Reads tables and stats only,
# and the version audit: its versions table (an input, so the report always has it) and any
# diff-<other>.csv that `snakemake --cores 1 audit` left beside it (shown when present).
# `snakemake --cores 1 --report` adds Snakemake's own report: the outputs marked report() in
# rules/*.smk, introduced by report/workflow.rst.


report: "../report/workflow.rst"


# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule build_report:
    input:
        unpack(get_controls_table),
        iterations=rules.collect_tables.output.iterations,
        trials=rules.collect_tables.output.trials,
        cells=rules.collect_tables.output.cells,
        epochs=rules.collect_tables.output.epochs,
        confusion=rules.collect_tables.output.confusion,
        cell_stats=rules.summarise_results.output.cells,
        comparisons=rules.summarise_results.output.comparisons,
        tests=rules.summarise_results.output.tests,
        memory=rules.summarise_results.output.memory,
        memory_comparisons=rules.summarise_results.output.memory_comparisons,
        latency=rules.summarise_results.output.latency,
        sensitivity=rules.summarise_results.output.sensitivity,
        quality=rules.summarise_results.output.quality,
        plan=rules.summarise_results.output.plan,
        gate=rules.check_gate.output.gate,
        ablation=rules.summarise_ablation.output.ablation,
        gaps=rules.summarise_ablation.output.gaps,
        profiles=rules.collect_profiles.output.profiles,
        scaling=rules.summarise_distributed.output.scaling,
        strategies=rules.summarise_distributed.output.strategies,
        flops=rules.summarise_flops.output.flops,
        telemetry_trace=rules.collect_telemetry_trace.output.trace,
        versions=rules.audit_versions.output.versions,
    output:
        html=f"{RESULTS}/report/report.html",
        pdf=report(
            f"{RESULTS}/report/report.pdf",
            caption="../report/captions/paper.rst",
            category="Paper",
        ),
        figures=report(
            directory(f"{RESULTS}/report/figures"),
            patterns=["{name}.svg"],
            caption="../report/captions/figures.rst",
            category="Figures",
            labels={"figure": "{name}"},
        ),
        data=directory(f"{RESULTS}/report/data"),
        readme=f"{RESULTS}/README.md",
    log:
        f"logs/{PLAN.run}/build_report.log",
    params:
        run=lookup(dpath="run", within=config),
        statistics=lookup(dpath="statistics", within=config),
    script:
        "../scripts/build_report.py"
