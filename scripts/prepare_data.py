import sys

sys.stderr = open(snakemake.log[0], "w")

from fwbench.measure.data import download_data
from fwbench.measure.data_files import DATASETS
from fwbench.measure.results import write_json


def main(record_path, data, shapes):
    """Fetch and verify every data set the sweep reads, before any trial starts."""
    by_shape = {tuple(spec.input_shape): name for name, spec in DATASETS.items()}
    names = {data["dataset"]} if data["dataset"] else {by_shape.get(s) for s in shapes} - {None}
    manifests = {name: download_data(name, data["data_dir"], allow_subset=data["allow_subset"])
                 for name in sorted(names)}
    write_json(manifests, record_path)


main(snakemake.output.record, snakemake.params.data, [tuple(s) for s in snakemake.params.shapes])
