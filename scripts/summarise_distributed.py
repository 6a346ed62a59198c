import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from fwbench.analysis.scaling import summarize_distributed
from fwbench.files import write_csv


def main(trials_path, outputs, statistics):
    frames = summarize_distributed(pd.read_parquet(trials_path),
                                   confidence=statistics["confidence"])
    for name, frame in frames.items():
        write_csv(frame, outputs[name])


main(snakemake.input.trials, dict(snakemake.output.items()), snakemake.params.statistics)
