# Host side: figures and the paper, HTML and PDF from one template. Reads tables and stats only.


rule build_report:
    input:
        iterations=rules.collect_tables.output.iterations,
        trials=rules.collect_tables.output.trials,
        cells=rules.collect_tables.output.cells,
        cell_stats=rules.summarise_results.output.cells,
        comparisons=rules.summarise_results.output.comparisons,
        tests=rules.summarise_results.output.tests,
        ablation=rules.summarise_ablation.output.ablation,
        gaps=rules.summarise_ablation.output.gaps,
        profiles=rules.collect_profiles.output.profiles,
    output:
        html=f"{RESULTS}/report/report.html",
        pdf=f"{RESULTS}/report/report.pdf",
        figures=directory(f"{RESULTS}/report/figures"),
    log:
        f"logs/{PLAN.run}/build_report.log",
    params:
        run=lookup(dpath="run", within=config),
    script:
        "../scripts/build_report.py"
