import sys

sys.stderr = open(snakemake.log[0], "w")

from fwbench.analysis.steady_state import changepoints, classify, warmup_end
from fwbench.measure.calibration import fix_warmup
from fwbench.measure.results import load_trial, write_json


def main(calibration_path, out_path, warmup):
    calibration = load_trial(calibration_path)
    times = calibration["iteration_ns"] if calibration["status"] == "ok" else []
    record = fix_warmup(calibration, found=warmup_end(times) if times else None,
                        kind=classify(times) if times else None,
                        changepoints=changepoints(times) if times else [],
                        warmup_min=warmup["min"], warmup_max=warmup["max"])
    write_json(record, out_path)
    print(f"{record['cell_id']}: warm up {record['iterations']} steps ({record['reason']})",
          file=sys.stderr)


main(snakemake.input.calibration, snakemake.output.warmup, snakemake.params.warmup)
