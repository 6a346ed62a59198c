import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from fwbench.analysis.gate import gate
from fwbench.files import write_csv


def main(trials_path, comparisons_path, output, statistics, controls_path=None,
         control_trials_path=None):
    """The gate over every trial the run measured, its A/A controls' included."""
    trials = pd.read_parquet(trials_path)
    if control_trials_path:
        trials = pd.concat([trials, pd.read_parquet(control_trials_path)], ignore_index=True)
    controls = pd.read_csv(controls_path) if controls_path else None
    write_csv(gate(trials, pd.read_csv(comparisons_path), statistics=statistics,
                   controls=controls), output)


main(snakemake.input.trials, snakemake.input.comparisons, snakemake.output.gate,
     snakemake.params.statistics, snakemake.input.get("controls"),
     snakemake.input.get("control_trials"))
