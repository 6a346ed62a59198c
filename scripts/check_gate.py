import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from fwbench.analysis.gate import gate
from fwbench.files import write_csv


def main(trials_path, comparisons_path, output, statistics, controls_path=None):
    controls = pd.read_csv(controls_path) if controls_path else None
    write_csv(gate(pd.read_parquet(trials_path), pd.read_csv(comparisons_path),
                   statistics=statistics, controls=controls), output)


main(snakemake.input.trials, snakemake.input.comparisons, snakemake.output.gate,
     snakemake.params.statistics, snakemake.input.get("controls"))
