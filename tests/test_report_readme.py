"""A shipped run's README (fwbench.report.readme), written from the run's own tables: the
machine for a person, the load while the trials measured, the dates and the wall time over each
session, and which published claims the run judged and which it could not, with why."""

from __future__ import annotations

import pandas as pd

from fwbench.report.inputs import Inputs
from fwbench.report.readme import readme
from tests.test_report import make_trials

CLAIMS = [
    {"id": "patel2023-cpu-inference", "paper": "patel2023",
     "verdict": "measured in another setting", "verdict_here": "contradicted",
     "differs": ["models lenet5 and resnet18 (paper: resnet18 and vgg16)"], "exploratory": ""},
    {"id": "tian2020-resnet18-train", "paper": "tian2020", "verdict": "inconclusive",
     "verdict_here": "", "differs": [], "exploratory": "5 trials a side, fewer than 7"},
    {"id": "tian2020-vgg16-train", "paper": "tian2020", "verdict": "not measured",
     "verdict_here": "", "differs": [], "exploratory": ""},
    {"id": "dai2022-speed-factors", "paper": "dai2022", "verdict": "not measured",
     "verdict_here": "", "differs": [], "exploratory": ""},
    {"id": "sumanjali2024-usability", "paper": "sumanjali2024", "verdict": "untestable",
     "verdict_here": "", "differs": [], "exploratory": ""},
]


def _trials(**columns) -> pd.DataFrame:
    """The report fixture's 48 trials (44 ok) on a 2-core virtual machine, 5 s apart, in one
    session, the last one measured while other work kept both processors busy."""
    trials = make_trials(mixed_commits=False)
    machine = {"cpu_count": 2, "cpu_model": "AMD EPYC", "hostname": "vm", "cpu_smt":
               "notsupported", "platform": "Linux-6.18.44-fc-v657-x86_64-with-glibc2.36",
               "session": "vm:100:1", "cpu_util_mean": [52.0] * (len(trials) - 1) + [100.0]}
    return trials.assign(**{**machine, **columns})


def _readme(trials: pd.DataFrame, run: str = "fixture") -> str:
    empty = pd.DataFrame()
    data = Inputs(trials=trials, cells=empty, cell_stats=empty, comparisons=empty, tests=empty)
    return readme(data, CLAIMS, run=run)


def test_the_readme_gives_the_machine_load_dates_and_wall_time():
    text = _readme(_trials())
    assert text.startswith("# fixture: ")
    assert "48 trials (44 ok) of 16 cells, throughput experiment, on the CPU" in text
    assert "PyTorch 2.14.1 and TensorFlow 2.21.0" in text
    # 48 trials started 5 s apart, the last one 4 s long: 239 s from first start to last end
    assert "Measured 2026-01-02 (UTC), from 03:04 to 03:08: 3 min 59 s of wall time." in text
    assert "2 logical processors (AMD EPYC)" in text and "Linux 6.18.44 (x86-64" in text
    assert "not supported by the processor or the virtual machine" in text
    assert "all processors were busy 52 % of the time during a trial (median over the 48 " \
           "trials whose telemetry read it; 52 % to 100 %)" in text
    assert "A trial's own 1 thread could keep 50 % of the 2 logical processors busy" in text
    assert "python -m fwbench rebuild results/fixture --check" in text


def test_a_run_resumed_in_another_session_counts_only_the_time_it_ran():
    trials = _trials()
    later = trials.index >= 24
    hour = pd.Timedelta(hours=1)
    trials.loc[later, "session"] = "vm:200:1"
    trials.loc[later, "started_at"] += hour
    trials.loc[later, "ended_at"] += hour
    # 23 * 5 + 4 = 119 s in each session; the hour between them is not wall time of the run
    assert "3 min 58 s of wall time over 2 sessions." in _readme(trials)


def test_the_readme_lists_the_claims_judged_and_counts_those_it_cannot():
    text = _readme(_trials())
    assert ("This run judges 1 of the 5 published claims in the paper's own setting, and "
            "measures 1 more in another setting.") in text
    assert ("- patel2023-cpu-inference: measured in another setting (here: contradicted); "
            "differs: models lenet5 and resnet18 (paper: resnet18 and vgg16)") in text
    assert "- tian2020-resnet18-train: inconclusive, exploratory" in text
    assert ("It cannot judge the other 3: 2 not measured (dai2022 1 and tian2020 1) and "
            "1 untestable (sumanjali2024 1); report/data/claims.csv gives each one's reason."
            ) in text
    assert "tian2020-vgg16-train" not in text      # counted, its reason in claims.csv


def test_unknown_load_and_a_copied_run_are_said():
    text = _readme(_trials(cpu_util_mean=None), run="reference")
    assert "The trials recorded no CPU utilization, so the load while measuring is unknown." \
        in text
    assert "The trials record the run name `fixture`: they were measured under that name and " \
           "copied here unchanged." in text
