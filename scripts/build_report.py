import sys

sys.stderr = open(snakemake.log[0], "w")

from fwbench.report.render import build_report


def main(inputs, outputs, run):
    build_report(inputs, html=outputs["html"], pdf=outputs["pdf"], figures=outputs["figures"],
                 run=run)


main(dict(snakemake.input.items()), dict(snakemake.output.items()), run=snakemake.params.run)
