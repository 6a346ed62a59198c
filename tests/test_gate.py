"""The gate a run passes before it ships (fwbench.analysis.gate): each check on a few hand-built
rows, the other processors' busy share read from a side file, every shipped run passed or marked
preliminary, and `fwbench rebuild --record` refusing a run that failed."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from fwbench.analysis.gate import QUIET_BUSY_MAX, failures, gate, passes
from fwbench.measure.telemetry.outside import NO_OUTSIDE, OTHER_WORK, outside_busy
from fwbench.report.sections.preliminary import SUMMARY
from tests.reference_runs import SHIPPED, rebuild, slow_down, small_run

KIND = "AuthenticAMD family 25 model 17, AVX-512"
PLAN = {"confidence": 0.95, "rope": 0.05}


def _trials(n: int = 4, **columns) -> pd.DataFrame:
    base = {"status": "ok", "measuring_code": "0123456789abcdef", "git_commit": "c" * 40,
            "git_dirty": False, "cpu_kind": KIND, "outside_busy_pct": 2.0,
            "threads_requested": 1, "world_size": 1, "cpu_count": 2, "cpu_util_mean": 52.0}
    return pd.DataFrame([{**base, **{k: v[i] if isinstance(v, list) else v
                                     for k, v in columns.items()}} for i in range(n)])


def _comparisons(*verdicts: str, exploratory: bool = False) -> pd.DataFrame:
    return pd.DataFrame([{"pair_id": f"throughput/cpu/lenet5/infer-b{k}", "verdict": v,
                          "exploratory": exploratory} for k, v in enumerate(verdicts, 1)])


CONTROLS = pd.DataFrame([{"control": "throughput/cpu/lenet5/infer-b4-aa-pytorch", "passed": True,
                          "framework": "pytorch", "model": "lenet5", "phase": "infer",
                          "batch_size": 4, "device": "cpu",
                          "ratio": 1.004, "note": "passed: equivalent to 1 over 8 pairs"}])


def _reasons(trials=None, comparisons=None, controls=CONTROLS, statistics=PLAN) -> list[str]:
    found = gate(_trials() if trials is None else trials,
                 _comparisons("pytorch_faster", "equivalent") if comparisons is None
                 else comparisons, statistics=statistics, controls=controls)
    assert list(found["check"].unique()) == ["one measuring code", "one processor kind",
                                             "quiet", "A/A controls", "headline comparisons"]
    assert passes(found) == (not failures(found))
    return failures(found)


def test_a_run_passes_when_every_check_does():
    assert _reasons() == []


def test_one_hash_of_what_measures_may_span_commits_and_two_hashes_fail():
    assert _reasons(_trials(git_commit=["a" * 40, "a" * 40, "b" * 40, "b" * 40])) == []
    [reason] = _reasons(_trials(measuring_code=["1" * 16, "1" * 16, "1" * 16, "2" * 16]))
    assert reason.startswith("one measuring code: The trials recorded 2 hashes")
    assert "1111111111111111: 3 trials" in reason and "2222222222222222: 1 trial" in reason


def test_in_containers_each_framework_has_one_hash_its_image_in_it():
    """Each framework runs in its own image, whose digest the hash holds: a container run's two
    frameworks never share a hash, and one hash per framework is one version of what measures."""
    images = {"image_digest": "sha256:" + "d" * 64,
              "framework": ["pytorch", "tensorflow", "pytorch", "tensorflow"]}
    assert _reasons(_trials(measuring_code=["1" * 16, "2" * 16, "1" * 16, "2" * 16],
                            **images)) == []
    [reason] = _reasons(_trials(measuring_code=["1" * 16, "2" * 16, "3" * 16, "2" * 16],
                                **images))
    assert reason == ("one measuring code: A framework's trials recorded several hashes of what "
                      "measures (pytorch: 1111111111111111, 3333333333333333): different code "
                      "or images measured them.")


def test_trials_without_the_hash_fall_back_to_one_clean_commit():
    assert _reasons(_trials(measuring_code=None)) == []
    [mixed] = _reasons(_trials(measuring_code=None, git_commit=["a" * 40] * 3 + ["b" * 40]))
    assert "mixes 2 commits (aaaaaaaaaaaa: 3 trials and bbbbbbbbbbbb: 1 trial)" in mixed
    [dirty] = _reasons(_trials(measuring_code=None, git_dirty=[False, True, False, False]))
    assert "1 trial ran from a work tree with uncommitted changes" in dirty
    [unknown] = _reasons(_trials(measuring_code=None, git_commit=None))
    assert "no commit either" in unknown


def test_a_processor_kind_must_be_recorded_and_one():
    [missing] = _reasons(_trials(cpu_kind=[KIND, None, None, KIND]))
    assert missing == ("one processor kind: 2 of 4 trials recorded the processor without its "
                       "vendor, family and model: the run cannot show that one kind of "
                       "processor measured it.")
    [named] = _reasons(_trials(cpu_kind=None, cpu_model="AMD EPYC"))
    assert "4 of 4 trials recorded the processor only by its name (AMD EPYC), without" in named
    [two] = _reasons(_trials(cpu_kind=[KIND, KIND, "GenuineIntel family 6 model 143, AVX-512 "
                                                   "and AMX", KIND]))
    assert "2 kinds of processor" in two
    assert _reasons(_trials().drop(columns="cpu_kind"))[0].startswith(
        "one processor kind: 4 of 4 trials recorded the processor without")


def test_every_ok_trial_must_run_quiet_at_the_plans_share():
    [loud] = _reasons(_trials(outside_busy_pct=[2.0, 99.6, 40.0, 5.0]))
    assert loud.startswith("quiet: 2 trials of 4 ran beside other work")
    assert "(median; 40 % to 99.6 %), where the plan allows less than 10 %" in loud
    failed = _trials(outside_busy_pct=[2.0, 2.0, 2.0, 99.0], status=["ok"] * 3 + ["oom"])
    assert _reasons(failed) == []                                # a failed trial timed nothing
    assert _reasons(_trials(outside_busy_pct=30.0), statistics={**PLAN, "quiet_busy_max": 0.5}) \
        == []
    assert QUIET_BUSY_MAX == 0.10


def test_tables_from_before_the_column_derive_it_from_the_whole_machine():
    """99.8 % of two processors with one thread of its own: the other one was 99.6 % busy;
    53 %: 6 %, quiet. Two threads on two processors leave nothing outside."""
    old = _trials(cpu_util_mean=[99.8, 53.0, 53.0, 53.0]).drop(columns="outside_busy_pct")
    [loud] = _reasons(old)
    assert "1 trial of 4" in loud and "busy 99.6 %" in loud
    assert _reasons(_trials(cpu_util_mean=99.8, world_size=2).drop(
        columns="outside_busy_pct")) == []
    [unknown] = _reasons(_trials(cpu_util_mean=None).drop(columns="outside_busy_pct"))
    assert unknown.startswith("quiet: 4 trials recorded nothing that shows how busy")


def test_a_run_needs_aa_controls_that_pass():
    [none] = _reasons(controls=None)
    assert none.startswith("A/A controls: no A/A controls")
    failed = pd.DataFrame([{"control": "throughput/cpu/lenet5/train-b4-aa-tensorflow",
                            "framework": "tensorflow", "model": "lenet5", "phase": "train",
                            "batch_size": 4, "device": "cpu",
                            "passed": False, "ratio": 1.0834,
                            "note": "failed: the design found a difference between a cell and "
                                    "itself (1.083, interval excluding 1), a false positive"},
                           *CONTROLS.to_dict("records")])
    assert _reasons(controls=failed) == [
        "A/A controls: TensorFlow's A/A control of lenet5 training at batch 4 on the CPU failed "
        "(ratio 1.08): the design found a difference between a cell and itself (1.083, "
        "interval excluding 1), a false positive."]


def test_each_undecided_or_exploratory_comparison_is_a_reason():
    reasons = _reasons(comparisons=_comparisons("tensorflow_faster", "inconclusive",
                                                "inconclusive"))
    assert reasons == ["headline comparisons: The comparisons of "
                       "`throughput/cpu/lenet5/infer-b2` and `throughput/cpu/lenet5/infer-b3` are "
                       "inconclusive: the plan states no power for undecided comparisons."]
    [hint] = _reasons(comparisons=_comparisons("pytorch_faster", exploratory=True))
    assert "reads PyTorch faster only as a hint (exploratory): the plan states no power" in hint
    assert _reasons(comparisons=pd.DataFrame(columns=["pair_id", "verdict"])) == [
        "headline comparisons: No headline comparison: the run compared no matched pair."]


SIDE_FILE = """slot,t_ns,device,cpu_util_pct,cpu0_util_pct,cpu1_util_pct,cpu2_util_pct
0,100,cpu,60.0,100.0,70.0,10.0
1,200,cpu,40.0,20.0,100.0,0.0
2,300,cpu,33.3,0.0,100.0,0.0
"""


def test_the_processors_outside_a_trials_own_read_per_processor(tmp_path):
    side = tmp_path / "trial-1.telemetry.csv"
    side.write_text(SIDE_FILE)
    markers = {"measure": 100, "end": 300}               # the first two samples
    assert outside_busy(side, markers, threads=1, processors=3, own_cpus=[1]) == (
        pytest.approx((55 + 10) / 2), "per processor, the trial's own as recorded")
    assert outside_busy(side, markers, threads=1, processors=3) == (
        pytest.approx((40 + 10) / 2), "per processor, the trial's own taken as the busiest")
    assert outside_busy(side, markers, threads=3, processors=3) == (None, NO_OUTSIDE)
    whole = tmp_path / "whole.telemetry.csv"
    whole.write_text("slot,t_ns,device,cpu_util_pct\n0,100,cpu,99.8\n1,200,cpu,53.0\n")
    busy, how = outside_busy(whole, markers, threads=1, processors=2)
    assert busy == pytest.approx((99.6 + 6.0) / 2) and how.startswith("whole machine")
    assert outside_busy(None, {}, threads=1, processors=2, util_mean=53.0)[0] == \
        pytest.approx(6.0)
    assert outside_busy(None, {}, threads=1, processors=2)[0] is None


def test_the_measurements_own_work_is_not_other_work(tmp_path):
    """A 2-core machine: the trial keeps one processor busy (50 % of the machine), the sampler
    and supervisor another 6 %; other work 4 %, which is 8 % of the one processor outside."""
    side = tmp_path / "trial-1.telemetry.csv"
    side.write_text("slot,t_ns,device,cpu_util_pct,apparatus_cpu_pct,cpu0_util_pct,"
                    "cpu1_util_pct\n0,100,cpu,60.0,56.0,20.0,100.0\n"
                    "1,200,cpu,58.0,55.0,16.0,100.0\n2,300,cpu,50.0,52.0,0.0,100.0\n")
    busy, how = outside_busy(side, {"measure": 100, "end": 400}, threads=1, processors=2,
                             own_cpus=[1])
    # Per sample 4, 3, -2 % of the machine: the window's mean, floored once, over 1 of 2.
    assert busy == pytest.approx(5 / 3 * 2) and how == OTHER_WORK
    busy, _ = outside_busy(side, {"measure": 300, "end": 400}, threads=1, processors=2)
    assert busy == 0.0


@pytest.mark.parametrize("run", SHIPPED, ids=lambda run: run.name)
def test_every_shipped_run_passes_the_gate_or_says_it_is_preliminary(run):
    """The gate over the tables the run ships (recorded/), its A/A controls' trials included as
    the workflow includes them (scripts/check_gate.py): a run that fails it says so on page 1
    of its report and in its README, with every reason."""
    recorded = run / "recorded"
    statistics = yaml.safe_load((run / "config.yaml").read_text())["statistics"]
    controls = recorded / "stats" / "controls.csv"
    trials = [pd.read_parquet(recorded / "tables" / name) for name in
              ("trials.parquet", "controls.parquet") if (recorded / "tables" / name).is_file()]
    found = gate(pd.concat(trials, ignore_index=True),
                 pd.read_csv(recorded / "stats" / "comparisons.csv"), statistics=statistics,
                 controls=pd.read_csv(controls) if controls.is_file() else None)
    if passes(found):
        return
    readme = (run / "README.md").read_text()
    html = (run / "report" / "report.html").read_text()
    assert readme.startswith(f"# {run.name}: PyTorch and TensorFlow, measured (preliminary)")
    assert SUMMARY in readme and 'id="preliminary"' in html
    for reason in found[~found["passed"]]["reason"]:
        assert reason[1:] in readme, reason                     # each reason, as a sentence


@pytest.mark.slow
def test_record_refuses_a_run_that_fails_the_gate_unless_it_is_preliminary(tmp_path):
    run = small_run(tmp_path / "results" / "small")
    slow_down(run, "pytorch", 1.3, cells="*-aa-b")    # its PyTorch control finds a difference
    refused = rebuild(run, "--record")
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert "fwbench rebuild: gate: A/A controls: PyTorch's A/A control of" in refused.stderr
    assert "refused to record results/small" in refused.stderr
    assert not (run / "rebuild.sha256").exists()
    assert "(preliminary)" in (run / "README.md").read_text()
    recorded = rebuild(run, "--record", "--preliminary")
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    assert "fwbench rebuild: preliminary; checksums" in recorded.stderr
    assert "stats/gate.csv" in (run / "rebuild.sha256").read_text()
