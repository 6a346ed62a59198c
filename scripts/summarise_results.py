import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from fwbench.analysis.latency import latency_summaries
from fwbench.analysis.memory import memory_comparisons, memory_summaries
from fwbench.analysis.stats import summarize
from fwbench.files import write_csv


def main(iterations_path, trials_path, outputs, seed, statistics):
    trials, iterations = pd.read_parquet(trials_path), pd.read_parquet(iterations_path)
    frames = summarize(trials, iterations, seed=seed, **statistics)
    frames["memory"] = memory_summaries(trials, confidence=statistics["confidence"])
    frames["memory_comparisons"] = memory_comparisons(
        trials, confidence=statistics["confidence"], rope=statistics["rope"],
        min_trials_for_verdict=statistics["min_trials_for_verdict"],
        family=statistics["family"])
    frames["latency"] = latency_summaries(trials, iterations, seed=seed,
                                          confidence=statistics["confidence"])
    for name, frame in frames.items():
        write_csv(frame, outputs[name])


main(snakemake.input.iterations, snakemake.input.trials, dict(snakemake.output.items()),
     seed=snakemake.params.seed, statistics=snakemake.params.statistics)
