"""Helpers around Snakemake runs of this workflow, one module per concern: safe unlocking
before a resume (locks), the host jobs' environment (host), a run rebuilt from its cell files
(rebuild) and proved byte for byte (manifest), the cause of a failed job (failures), and the
progress line each trial job prints (progress). Every stage may import them; they import none."""
