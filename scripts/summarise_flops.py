import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from fwbench.analysis.flops import achieved_flops
from fwbench.files import write_csv


def main(cells_path, trials_path, output, models, peak_flops):
    frame = achieved_flops(pd.read_csv(cells_path), pd.read_parquet(trials_path), models,
                           peak_flops)
    write_csv(frame, output)


main(snakemake.input.cells, snakemake.input.trials, snakemake.output.flops,
     snakemake.params.models, snakemake.params.peak_flops)
