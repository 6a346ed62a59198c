# One job per trial: a supervised fresh process measures one cell and writes its result.


rule run_trial:
    input:
        unpack(get_previous_trial),
    output:
        result=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/trial-{{trial}}.json",
        env=f"{RESULTS}/cells/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/trial-{{trial}}.env.json",
    log:
        f"logs/{PLAN.run}/run_trial/{{experiment}}/{{device}}/{{framework}}/{{model}}/{{cell}}/trial-{{trial}}.log",
    params:
        settings=get_trial_settings,
    threads: lookup(dpath="threads", within=config)
    resources:
        benchmark_slot=1,
    shell:
        "exec python -m fwbench trial --settings {params.settings:q}"
        " --result {output.result} --env {output.env} > {log} 2>&1"
