# fwbench: PyTorch against TensorFlow, from a validated config to a paper-style report.
# The table of contents; logic lives in the fwbench package, paths in fwbench/plan/sweep.py.

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/benchmark.smk"
include: "rules/tables.smk"
include: "rules/audit.smk"
include: "rules/statistics.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        get_final_output(),


rule benchmarks_only:
    input:
        get_trial_results(),
