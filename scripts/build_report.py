import sys

sys.stderr = open(snakemake.log[0], "w")

from fwbench.report.render import build_report


def main(inputs, outputs, run, statistics):
    build_report(inputs, html=outputs["html"], pdf=outputs["pdf"], figures=outputs["figures"],
                 data=outputs["data"], readme_path=outputs["readme"], run=run,
                 statistics=statistics)


main(dict(snakemake.input.items()), dict(snakemake.output.items()), run=snakemake.params.run,
     statistics=dict(snakemake.params.statistics))
