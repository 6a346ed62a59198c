import sys

sys.stderr = open(snakemake.log[0], "w")

from fwbench.analysis.profiles import collect_profiles
from fwbench.analysis.tables import write_tables


def main(paths, output):
    write_tables({"profiles": collect_profiles(paths)}, {"profiles": output})


main(snakemake.input.profiles, snakemake.output.profiles)
