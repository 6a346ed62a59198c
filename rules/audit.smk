# Host side, no framework import: the version audit. Every trial's env.json into one versions
# table per framework environment (image digest, or the native host), and what differs from
# another run: the target `audit` (`fwbench audit results/<run>`, from the run's trial files
# alone) diffs against every other run under results/ that has been audited;
# results/<run>/audit/diff-<other>.csv names one.

from fwbench.analysis.versions import audited_runs


# Calls fwbench.analysis.versions.versions_table (through its main).
# The trials table as input, not every env.json: the job that writes a trial's env.json writes
# its result, so the table is remade whenever one is, and this rule with it; the env.json paths
# are a parameter (naming every trial file in one aggregate only saves planning).
# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule audit_versions:
    input:
        trials=f"{RESULTS}/tables/trials.parquet",
    output:
        versions=report(
            f"{RESULTS}/audit/versions.csv",
            caption="../report/captions/versions.rst",
            category="Provenance",
            subcategory="Software versions",
        ),
    log:
        f"logs/{PLAN.run}/audit_versions.log",
    params:
        envs=PLAN.trial_paths("env.json", controls=False),
    shell:
        "python -m fwbench.analysis.versions versions --out {output.versions} {params.envs:q} > {log} 2>&1"


# Calls fwbench.analysis.versions.diff_versions (through its main).
# lint-ok software: host side, runs natively in the project environment (README, "Software").
rule audit_diff:
    input:
        this=rules.audit_versions.output.versions,
        other="results/{other}/audit/versions.csv",
    output:
        diff=f"{RESULTS}/audit/diff-{{other}}.csv",
    log:
        f"logs/{PLAN.run}/audit_diff/{{other}}.log",
    wildcard_constraints:
        other=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    shell:
        "python -m fwbench.analysis.versions diff --out {output.diff} {input.this} {input.other}"
        " > {log} 2>&1"


rule audit:
    input:
        versions=rules.audit_versions.output.versions,
        diffs=[f"{RESULTS}/audit/diff-{other}.csv" for other in audited_runs(exclude=PLAN.run)],
