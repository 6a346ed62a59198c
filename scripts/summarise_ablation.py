import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from fwbench.analysis.ablation import summarize_ablation
from fwbench.files import write_csv


def main(trials_path, outputs, ablation, seed, statistics):
    frames = summarize_ablation(pd.read_parquet(trials_path), ablation, seed=seed,
                                confidence=statistics["confidence"], rope=statistics["rope"])
    for name in ("ablation", "gaps"):
        write_csv(frames[name], outputs[name])


main(snakemake.input.trials, dict(snakemake.output.items()), snakemake.params.ablation,
     seed=snakemake.params.seed, statistics=snakemake.params.statistics)
