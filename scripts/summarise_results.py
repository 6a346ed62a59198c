import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from fwbench.stats import summarize


def main(iterations_path, trials_path, outputs, seed, statistics):
    frames = summarize(pd.read_parquet(trials_path), pd.read_parquet(iterations_path), seed=seed,
                       **statistics)
    for name, frame in frames.items():
        frame.to_csv(outputs[name], index=False)


main(snakemake.input.iterations, snakemake.input.trials, dict(snakemake.output.items()),
     seed=snakemake.params.seed, statistics=snakemake.params.statistics)
