import sys

sys.stderr = open(snakemake.log[0], "w")

from fwbench.analysis.tables import collect_tables, write_tables


def main(trial_paths, outputs):
    tables = collect_tables(trial_paths)
    write_tables(tables, outputs)
    trials = tables["trials"]
    print(f"{len(trials)} trials, {int((trials['status'] == 'ok').sum())} ok", file=sys.stderr)


main(snakemake.input.trials, dict(snakemake.output.items()))
