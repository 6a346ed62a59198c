import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from fwbench.analysis.tables import write_tables
from fwbench.analysis.telemetry_trace import trace_table


def main(trials_path, result_paths, output):
    trace = trace_table(pd.read_parquet(trials_path), result_paths)
    write_tables({"trace": trace}, {"trace": output})


main(snakemake.input.trials, snakemake.params.results, snakemake.output.trace)
