import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from fwbench.analysis.controls import control_comparisons
from fwbench.files import write_csv


def main(trials_path, iterations_path, output, seed, statistics):
    controls = control_comparisons(pd.read_parquet(trials_path),
                                   pd.read_parquet(iterations_path), seed=seed, **statistics)
    write_csv(controls, output)
    print(f"{len(controls)} A/A controls, {int(controls['passed'].sum())} passed",
          file=sys.stderr)


main(snakemake.input.trials, snakemake.input.iterations, snakemake.output.controls,
     seed=snakemake.params.seed, statistics=snakemake.params.statistics)
