"""Tests of fwbench.measure.telemetry: the sampler process, the side files, the summaries, the
guard.

The GPU cases use the FAKE NVML in tests/fakes/nvml.py (autospecced from the real pynvml), the
only fake here; the host side is read for real. The sampler is a real process in every test
that names Sampler.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import psutil
import pytest

import fwbench.measure.telemetry as telemetry
from fwbench.measure.harness import Schedule, measure
from fwbench.measure.telemetry import (
    Sampler,
    TelemetryError,
    load_nvml,
    load_samples,
    measure_idle,
    read_energy_mj,
    summarize_phases,
    visible_gpu_uuids,
    wait_for_idle_temperature,
)
from fwbench.measure.telemetry.collector import Collector
from fwbench.measure.telemetry.columns import (
    GPU_NAMES,
    decode_clock_event_reasons,
    describe,
    header,
)
from fwbench.measure.telemetry.gpu import GPM_COLUMNS, READERS, GpuReader

try:
    from tests.fakes import nvml as fake_nvml
except ImportError:  # tests/ is not a package: pytest put tests/ itself on sys.path
    from fakes import nvml as fake_nvml

PERIOD_S = 0.05
Temp = namedtuple("Temp", "label current high critical")


def fake(scenario: str) -> str:
    """The spec naming a fake scenario, importable by the sampler process too."""
    return f"{fake_nvml.__name__}:{scenario}"


def run_sampler(tmp_path, seconds: float, **kwargs) -> tuple[Sampler, list[dict]]:
    out = tmp_path / "trial-0.telemetry.csv"
    with Sampler(out, period_s=PERIOD_S, **kwargs) as sampler:
        time.sleep(seconds)
    return sampler, load_samples(out)


def gpu_rows(rows):
    return [r for r in rows if r["device"] == "gpu"]


# --- the API and the columns -----------------------------------------------------------------

def test_public_api_is_listed():
    assert sorted(telemetry.__all__) == [
        "SAMPLING_PERIOD_S", "Sampler", "TelemetryError", "load_nvml", "load_samples",
        "measure_idle", "normalize_uuid", "read_energy_mj", "sidecar_path",
        "summarize_phases", "visible_gpu_uuids", "wait_for_idle_temperature"]
    assert all(hasattr(telemetry, name) for name in telemetry.__all__)


def test_every_column_names_its_unit():
    units = ("_ns", "_mw", "_mj", "_pct", "_c", "_mhz", "_bytes", "_count", "_reasons",
             "_pstate")
    ids = {"slot", "device", "gpu_uuid", "gpu_index"}
    names = header(4)
    assert len(names) == len(set(names))
    assert [n for n in names if n not in ids and not n.endswith(units)] == []
    assert set(describe(4)) == set(names)
    readers = {c for columns, _ in READERS for c in columns} | set(GPM_COLUMNS)
    assert readers == set(GPU_NAMES)


def test_docs_describe_every_column():
    text = (Path(__file__).parent.parent / "docs" / "telemetry.md").read_text()
    assert [n for n in header(0) if f"`{n}`" not in text] == []
    assert "`cpu<i>_util_pct`" in text


def test_importing_telemetry_imports_no_framework():
    code = ("import sys, fwbench.measure.telemetry; "
            "print(sorted({'torch', 'tensorflow'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_fake_nvml_rejects_misnamed_and_misused_calls():
    nvml = fake_nvml.one_gpu()
    with pytest.raises(AttributeError):
        nvml.nvmlDeviceGetPowerUsge  # noqa: B018 - the misspelling is the test
    with pytest.raises(TypeError):
        nvml.nvmlDeviceGetPowerUsage()
    with pytest.raises(AssertionError, match="does not implement"):
        nvml.nvmlDeviceGetFanSpeed(nvml.nvmlDeviceGetHandleByIndex(0))


# --- a real sampler run on this machine ------------------------------------------------------

def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_real_sampler_run_lines_up_with_the_harness_markers(tmp_path):
    out = tmp_path / "trial-0.telemetry.csv"
    before = time.perf_counter_ns()
    with Sampler(out, period_s=PERIOD_S) as sampler:
        sampler.watch(os.getpid())
        m = measure(lambda: busy(0.02), lambda: None, Schedule(warmup=4, iterations=25))
    after = time.perf_counter_ns()

    assert sorted(p.name for p in tmp_path.iterdir()) == ["trial-0.telemetry.csv",
                                                          "trial-0.telemetry.json"]
    with open(out, newline="") as f:
        assert next(csv.reader(f)) == header(psutil.cpu_count())
    meta = json.loads((tmp_path / "trial-0.telemetry.json").read_text())
    rows = load_samples(out)
    host = [r for r in rows if r["device"] == "cpu"]
    schedule = meta["sampler"]
    period_ns = PERIOD_S * 1e9

    # The schedule: one host row per slot, slots increasing, each taken at or after its time.
    slots = [r["slot"] for r in host]
    assert slots == sorted(set(slots)) and len(host) == schedule["samples"]
    assert slots[-1] + 1 - len(slots) == schedule["missed_slots"]
    late = sorted(r["t_ns"] - (schedule["t0_ns"] + r["slot"] * period_ns) for r in host)
    assert late[0] >= 0 and late[len(late) // 2] < period_ns / 2
    # The clock: the same as the harness's, covering all its markers.
    assert before <= host[0]["t_ns"] <= m.markers_ns["cold_start"]
    assert m.markers_ns["end"] <= host[-1]["t_ns"] <= after
    # The readings.
    assert all(0 <= r["cpu_util_pct"] <= 100 for r in host if r["cpu_util_pct"] is not None)
    assert host[-1]["proc_rss_bytes"] > 10 * 2**20 and host[-1]["proc_count"] >= 1
    summary = summarize_phases(out, m.markers_ns, batch_size=1, iterations=25)
    phase = summary["phases"]["measure"]
    assert phase["n_samples"] >= 5
    assert phase["cpu_util_mean_pct"] >= 100 / psutil.cpu_count() * 0.5  # one core spinning
    # The spinning process is the measurement's own (watched, and the sampler's parent).
    timed = [r for r in host if m.markers_ns["measure"] <= r["t_ns"] < m.markers_ns["end"]
             and r["apparatus_cpu_pct"] is not None]
    assert sum(r["apparatus_cpu_pct"] for r in timed) / len(timed) >= 100 / psutil.cpu_count() * 0.5
    # Sources: every column described; GPU rows exist, or the reason they don't.
    assert set(meta["columns"]) == set(header(psutil.cpu_count()))
    assert bool(gpu_rows(rows)) != ("gpu" in meta["unavailable"])
    assert summary["unavailable"] == meta["unavailable"]


def test_late_samples_skip_slots_instead_of_bunching(tmp_path):
    sampler, rows = run_sampler(tmp_path, 0.6, nvml=fake("slow_gpu"))
    schedule = sampler.meta["sampler"]
    slots = [r["slot"] for r in rows if r["device"] == "cpu"]
    assert schedule["missed_slots"] > 0 and slots[-1] + 1 - len(slots) == schedule["missed_slots"]
    assert all(b - a >= 2 for a, b in zip(slots, slots[1:]))  # 80 ms readings, 50 ms period
    assert all(r["t_ns"] >= schedule["t0_ns"] + r["slot"] * PERIOD_S * 1e9 for r in rows)


def test_watching_a_process_that_ends():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with Collector(gpu_uuids=[]) as collector:
            collector.watch(child.pid)
            row = collector.sample(0)[0]
            assert row["proc_rss_bytes"] > 2**20 and row["proc_count"] == 1
            child.kill()
            child.wait()
            row = collector.sample(1)[0]
            report = collector.report()
    finally:
        child.kill()
        child.wait()
    assert row.get("proc_rss_bytes") is None
    assert report["cpu"]["watched_process_exited_t_ns"] == row["t_ns"]
    assert report["unavailable"]["gpu"] == "no GPU requested for this trial"


# --- one test per unavailable source: the trial goes on and the side file says why -----------

def test_no_nvml_library(tmp_path, monkeypatch):
    sampler, rows = run_sampler(tmp_path, 0.2, nvml=fake("no_library"))
    assert gpu_rows(rows) == [] and rows
    assert all(r[c] is None for r in rows for c in GPU_NAMES)
    assert "libnvidia-ml.so.1" in sampler.meta["unavailable"]["gpu"]
    # No binding installed at all.
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert load_nvml() == (None, telemetry.gpu.NVML_MISSING)
    assert "pip install nvidia-ml-py" in telemetry.gpu.NVML_MISSING


def test_no_gpu(tmp_path):
    sampler, rows = run_sampler(tmp_path, 0.2, nvml=fake("no_gpu"))
    assert gpu_rows(rows) == [] and rows
    assert sampler.meta["unavailable"]["gpu"] == "NVML reports no GPU on this machine"
    # A requested GPU that is not there is named.
    reader = GpuReader(["GPU-12345678-0000-0000-0000-000000000000"], nvml=fake_nvml.one_gpu)
    reader.open()
    assert reader.read() == []
    assert "GPU-12345678" in reader.report()["unavailable"]["gpu"]


def test_nvml_error_mid_trial(tmp_path):
    sampler, rows = run_sampler(tmp_path, 0.4, nvml=fake("lost_mid_trial"))
    power = [r["gpu_power_mw"] for r in gpu_rows(rows)]
    # Probe read 1, samples read 2 and 3, then the GPU is lost: the rest are empty.
    assert power[:2] == [250_000, 250_000] and len(power) >= 5
    assert all(p is None for p in power[2:])
    assert len(rows) == 2 * sampler.meta["sampler"]["samples"]
    errors = {e["column"]: e for e in sampler.meta["errors"]}
    assert errors["gpu_power_mw"]["error"] == "GPU is lost"
    assert errors["gpu_power_mw"]["count"] == len(power) - 2
    assert "NVML error while sampling" in sampler.meta["unavailable"]["gpu_temp_c"]
    markers = {"cold_start": rows[0]["t_ns"], "warmup": rows[1]["t_ns"] + 1,
               "measure": rows[2]["t_ns"] + 1, "end": rows[-1]["t_ns"] - 1}
    summary = summarize_phases(tmp_path / "trial-0.telemetry.csv", markers)
    assert summary["phases"]["measure"]["energy_source"] is None  # said, not made up


def test_no_temperature_sensors(monkeypatch):
    monkeypatch.setattr(psutil, "sensors_temperatures", lambda: {}, raising=False)
    with Collector(nvml=fake_nvml.no_temperature) as collector:
        rows = collector.sample(0) + collector.sample(1)
        unavailable = collector.report()["unavailable"]
    assert "psutil.sensors_temperatures() is empty" in unavailable["cpu_temp_c"]
    assert "Not Supported" in unavailable["gpu_temp_c"]
    assert all(r["cpu_temp_c"] is None for r in rows if r["device"] == "cpu")
    assert all(r.get("gpu_temp_c") is None and r["gpu_power_mw"] for r in gpu_rows(rows))
    idle = {"gpus": {fake_nvml.UUID_A: {"temp_c": 40}}, "cpu_temp_c": 35}
    guard = wait_for_idle_temperature(5, 60, idle=idle, nvml=fake_nvml.no_temperature,
                                      sleep=pytest.fail)
    assert guard["reached"] is None and guard["waited_s"] == 0
    assert "no temperature readable" in guard["reason"]
    # Sensors, but none of them the CPU's; and a platform where psutil reads none.
    monkeypatch.setattr(psutil, "sensors_temperatures",
                        lambda: {"nvme": [Temp("Composite", 41.0, 80.0, 90.0)]})
    with Collector() as collector:
        assert "among psutil.sensors_temperatures(): nvme" in \
            collector.report()["unavailable"]["cpu_temp_c"]
    monkeypatch.delattr(psutil, "sensors_temperatures")
    with Collector() as collector:
        assert "cannot read temperatures" in collector.report()["unavailable"]["cpu_temp_c"]


# --- the sampler process fails loudly; an interrupted trial leaves nothing -------------------

def test_a_dead_sampler_fails_loudly_and_writes_nothing(tmp_path):
    with pytest.raises(TelemetryError, match="SIGKILL"):
        with Sampler(tmp_path / "trial-0.telemetry.csv", period_s=PERIOD_S) as sampler:
            os.kill(sampler.ready["pid"], signal.SIGKILL)
            time.sleep(0.2)
            with pytest.raises(TelemetryError, match="was killed by SIGKILL"):
                sampler.check()
    assert list(tmp_path.iterdir()) == []


def test_an_exception_in_the_trial_writes_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with Sampler(tmp_path / "trial-0.telemetry.csv", period_s=PERIOD_S) as sampler:
            raise RuntimeError("trial interrupted")
    assert list(tmp_path.iterdir()) == []
    assert not psutil.pid_exists(sampler.ready["pid"])


def test_the_sampler_exits_when_its_parent_goes(tmp_path):
    tmp = tmp_path / "partial.tmp"
    proc = subprocess.Popen([sys.executable, "-m", "fwbench.measure.telemetry.process"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    config = {"period_s": PERIOD_S, "pid": None, "gpu_uuids": [], "nice": 0, "nvml": None,
              "powercap_root": str(tmp_path / "no-powercap"), "tmp_csv": str(tmp)}
    proc.stdin.write((json.dumps(config) + "\n").encode())
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["event"] == "ready"
    proc.stdin.close()  # what the kernel does when the parent dies
    assert proc.wait(timeout=10) == 3
    proc.stdout.close()
    assert not tmp.exists()


# --- GPUs: matched by UUID, every reading, fallbacks on older devices ------------------------

def test_gpu_rows_from_a_healthy_gpu_fill_every_column():
    with Collector(pid=os.getpid(), nvml=fake_nvml.one_gpu) as collector:
        collector.sample(0)
        row = gpu_rows(collector.sample(1))[0]
        report = collector.report()
    assert [c for c in GPU_NAMES if row.get(c) is None] == []
    assert row["gpu_uuid"] == fake_nvml.UUID_A and row["gpu_sm_active_pct"] == 88.5
    assert not any(k.startswith("gpu") for k in report["unavailable"])
    assert report["gpus"] == [{"uuid": fake_nvml.UUID_A, "index": 0,
                                "name": "NVIDIA H100 80GB HBM3 (fake)",
                                "power_instant": True, "gpm": True}]
    assert decode_clock_event_reasons(row["gpu_clocks_event_reasons"]) == ["sw_power_cap"]


def test_gpus_are_matched_by_uuid_not_index():
    short = fake_nvml.UUID_B.removeprefix("GPU-")  # as torch.cuda prints it
    with Collector(gpu_uuids=[short], nvml=fake_nvml.two_gpus) as collector:
        rows = gpu_rows(collector.sample(0))
    assert [(r["gpu_uuid"], r["gpu_index"], r["gpu_power_mw"]) for r in rows] == [
        (fake_nvml.UUID_B, 1, 300_000)]
    assert visible_gpu_uuids("GPU-bbbb", nvml=fake_nvml.two_gpus) == [fake_nvml.UUID_B]
    assert visible_gpu_uuids("1,0", nvml=fake_nvml.two_gpus) == [fake_nvml.UUID_B,
                                                                 fake_nvml.UUID_A]
    assert visible_gpu_uuids("0,nonsense,1", nvml=fake_nvml.two_gpus) == [fake_nvml.UUID_A]
    assert visible_gpu_uuids(None, nvml=fake_nvml.two_gpus) == [fake_nvml.UUID_A,
                                                                fake_nvml.UUID_B]
    assert visible_gpu_uuids(None, nvml=fake_nvml.no_library) == []


def test_older_gpu_falls_back_and_says_what_it_lacks():
    with Collector(nvml=fake_nvml.older_gpu) as collector:
        row = gpu_rows(collector.sample(0))[0]
        unavailable = collector.report()["unavailable"]
    assert row["gpu_temp_c"] == 40  # through the older nvmlDeviceGetTemperature
    assert row.get("gpu_power_instant_mw") is None and row["gpu_power_mw"] == 250_000
    assert "Not Supported" in unavailable["gpu_power_instant_mw"]
    assert "Hopper" in unavailable["gpu_sm_active_pct"]


def test_read_energy_mj():
    readings = read_energy_mj([fake_nvml.UUID_A, "GPU-not-there"], nvml=fake_nvml.one_gpu)
    assert readings["GPU-not-there"] is None
    assert readings[fake_nvml.UUID_A] >= 10**9
    assert read_energy_mj([fake_nvml.UUID_A], nvml=fake_nvml.no_library) == {
        fake_nvml.UUID_A: None}


# --- summaries --------------------------------------------------------------------------------

def synthetic_rows(*, power_w=200.0, energy=True, instant=True, seconds=3.0):
    """One GPU at constant power, sampled every 0.1 s, its temperature rising 1 °C a sample."""
    rows = []
    for slot in range(int(seconds / 0.1) + 1):
        t = slot * 100_000_000
        rows.append({"slot": slot, "t_ns": t, "device": "cpu", "cpu_util_pct": 50.0,
                     "cpu_steal_pct": 1.0, "cpu_temp_c": None, "proc_rss_bytes": 2**30})
        rows.append({"slot": slot, "t_ns": t + 1000, "device": "gpu", "gpu_uuid": "GPU-x",
                     "gpu_power_mw": power_w * 1000 + 5000,
                     "gpu_power_instant_mw": power_w * 1000 if instant else None,
                     "gpu_energy_mj": 5_000_000 + power_w * t / 1e6 if energy else None,
                     "gpu_util_pct": 90, "gpu_temp_c": 40 + slot,
                     "gpu_clocks_event_reasons": 0x40 if slot > 20 else 0})
    return rows


MARKERS = {"cold_start": 50_000_000, "warmup": 500_000_000, "measure": 1_000_000_000,
           "end": 2_500_000_000}


def test_summary_prefers_the_counter_read_at_the_markers():
    readings = {"warmup": {"GPU-x": 1_000}, "measure": {"GPU-x": 101_000},
                "end": {"GPU-x": 401_000}}
    idle = {"gpus": {"GPU-x": {"power_w": 50.0, "energy_counter_update_s": 0.02}}}
    s = summarize_phases(synthetic_rows(), MARKERS, readings, batch_size=10, iterations=30,
                         warmup_iterations=5, idle=idle)
    measure_, warmup = s["phases"]["measure"], s["phases"]["warmup"]
    assert s["power_field"] == "gpu_power_instant_mw" and s["gpus"] == ["GPU-x"]
    assert measure_["energy_source"] == "counter_at_markers" and measure_["energy_j"] == 300.0
    assert measure_["energy_per_sample_j"] == 1.0
    assert measure_["energy_above_idle_j"] == 300.0 - 50.0 * 1.5
    assert warmup["energy_j"] == 100.0 and warmup["energy_per_sample_j"] == 2.0
    assert measure_["power_mean_w"] == 200.0 and measure_["n_samples"] == 15
    # Start: the last sample before the marker (slot 9); max: the last inside (slot 24).
    assert measure_["gpu_temp_start_c"] == 49 and measure_["gpu_temp_max_c"] == 64
    assert measure_["clock_event_reasons"] == ["hw_thermal_slowdown"]
    assert measure_["cpu_util_mean_pct"] == 50.0 and measure_["proc_rss_max_bytes"] == 2**30
    # cold start: no marker reading, so the sampled counter, whose resolution is the 0.1 s
    # period: 0.45 s is under 10 periods, so its energy is flagged, not reported.
    cold = s["phases"]["cold_start"]
    assert cold["energy_source"] == "counter_sampled" and cold["energy_j"] is None
    assert cold["energy_per_sample_j"] is None and cold["energy_above_idle_j"] is None
    assert list(s["energy_flags"]) == ["cold_start"]
    cold_start = s["energy_flags"]["cold_start"]
    assert "0.450 s is shorter than 10 updates of counter_sampled" in cold_start
    assert s["energy_counter_update_s"] == 0.02
    assert s["energy_counter_update_source"].startswith("measured")


def test_summary_falls_back_to_sampled_counter_then_integrated_power():
    sampled = summarize_phases(synthetic_rows(), MARKERS, None, 10, 30)["phases"]["measure"]
    assert sampled["energy_source"] == "counter_sampled"
    assert sampled["energy_j"] == pytest.approx(300.0, rel=1e-3)
    integrated = summarize_phases(synthetic_rows(energy=False), MARKERS)["phases"]["measure"]
    assert integrated["energy_source"] == "integrated_power"
    assert integrated["energy_j"] == pytest.approx(300.0, rel=1e-6)
    # Without the instant field the plain (averaged) reading is used, for every row.
    average = summarize_phases(synthetic_rows(energy=False, instant=False), MARKERS)
    assert average["power_field"] == "gpu_power_mw"
    assert average["phases"]["measure"]["power_mean_w"] == 205.0


def test_summary_reads_a_dataframe_like_the_file(tmp_path):
    pd = pytest.importorskip("pandas")
    rows = synthetic_rows()
    frame = pd.DataFrame(rows)
    assert summarize_phases(frame, MARKERS, None, 10, 30)["phases"] == \
        summarize_phases(rows, MARKERS, None, 10, 30)["phases"]


# --- idle baseline and thermal guard ----------------------------------------------------------

def test_measure_idle():
    idle = measure_idle(0.3, period_s=0.1, nvml=fake_nvml.one_gpu)
    assert idle["power_w"] == 250.0 and idle["n_samples"] == 4
    assert idle["gpus"][fake_nvml.UUID_A] == {"power_w": 250.0,
                                              "power_field": "gpu_power_instant_mw",
                                              "temp_c": 40.0, "energy_counter_update_s": 0.0,
                                              "context_held": False}
    # The fake GPU is no CUDA device: no context could be held, and the result says why.
    assert idle["context"]["held"] == [] and idle["context"]["reason"]


def test_idle_is_measured_with_a_context_held_on_each_gpu():
    """The context holder is injectable: the fake NVML cannot make a CUDA context, so a fake
    holder records which GPUs it was asked for and that every sample was taken inside it."""
    entered = []

    @contextlib.contextmanager
    def holder(uuids):
        state = {"method": "fake", "held": list(uuids), "reason": None}
        entered.append(list(uuids))
        yield state
        state["samples_inside"] = "taken"

    idle = measure_idle(0.2, period_s=0.1, nvml=fake_nvml.two_gpus, hold_context=holder,
                        counter_probe_s=0)
    assert entered == [[fake_nvml.UUID_A, fake_nvml.UUID_B]]
    assert idle["context"] == {"method": "fake", "held": [fake_nvml.UUID_A, fake_nvml.UUID_B],
                               "reason": None, "samples_inside": "taken"}
    assert {u: g["context_held"] for u, g in idle["gpus"].items()} == {
        fake_nvml.UUID_A: True, fake_nvml.UUID_B: True}
    assert {u: g["power_w"] for u, g in idle["gpus"].items()} == {
        fake_nvml.UUID_A: 100.0, fake_nvml.UUID_B: 300.0}


def test_without_a_cuda_driver_idle_says_no_context_was_held():
    from fwbench.measure.cuda_driver import hold_cuda_contexts

    with hold_cuda_contexts([fake_nvml.UUID_A]) as state:  # no such GPU, here or anywhere
        assert state["held"] == []
        assert "idle measured without a CUDA context" in state["reason"] or (
            "CUDA does not see" in state["reason"])
    with hold_cuda_contexts([]) as state:
        assert state["reason"].startswith("no GPU to hold a context on")


def test_idle_measures_how_often_the_energy_counter_updates():
    idle = measure_idle(0.1, period_s=0.1, nvml=fake_nvml.counter_every_50ms,
                        counter_probe_s=0.6)
    assert 0.04 <= idle["gpus"][fake_nvml.UUID_A]["energy_counter_update_s"] <= 0.07


def one_gpu_rows(uuid, power_w=200.0, seconds=3.0):
    return [{**r, "gpu_uuid": uuid} if r["device"] == "gpu" else r
            for r in synthetic_rows(power_w=power_w, seconds=seconds)]


def test_energy_above_idle_subtracts_only_the_trials_gpus():
    """Idle: GPU A 100 W, GPU B 300 W. A trial on A subtracts 100 W, not the machine's 400."""
    idle = {"power_w": 400.0, "context": {"held": [fake_nvml.UUID_A, fake_nvml.UUID_B]},
            "gpus": {fake_nvml.UUID_A: {"power_w": 100.0, "energy_counter_update_s": 0.05},
                     fake_nvml.UUID_B: {"power_w": 300.0, "energy_counter_update_s": 0.05}}}
    rows = one_gpu_rows(fake_nvml.UUID_A)
    s = summarize_phases(rows, MARKERS, None, 10, 30, idle=idle)
    measure_ = s["phases"]["measure"]
    assert measure_["energy_j"] == pytest.approx(300.0, rel=1e-3)
    assert measure_["energy_above_idle_j"] == pytest.approx(300.0 - 100.0 * 1.5, rel=1e-3)
    assert s["idle_gpu_power_w"] == 100.0 and s["idle_note"] is None
    assert s["idle_context_held"] == [fake_nvml.UUID_A, fake_nvml.UUID_B]
    # A GPU the baseline did not read: no subtraction, and the reason.
    other = summarize_phases(one_gpu_rows("GPU-c"), MARKERS, None, 10, 30, idle=idle)
    assert other["phases"]["measure"]["energy_above_idle_j"] is None
    assert other["idle_note"] == "the idle baseline has no power for GPU-c"
    assert other["energy_counter_update_source"].startswith("assumed")


def test_energy_is_reported_only_over_windows_the_counter_resolves():
    readings = {m: {"GPU-x": 1_000 + 200 * t // 1_000_000} for m, t in MARKERS.items()}
    idle = {"gpus": {"GPU-x": {"power_w": 50.0, "energy_counter_update_s": 0.1}}}
    s = summarize_phases(synthetic_rows(), MARKERS, readings, 10, 30, idle=idle)
    # counter at the markers, updated every 0.1 s: at least 1 s. Cold start (0.45 s) and
    # warm-up (0.5 s) are flagged; the measure phase (1.5 s) is reported.
    assert sorted(s["energy_flags"]) == ["cold_start", "warmup"]
    assert "(0.1 s each, 1 s)" in s["energy_flags"]["warmup"]
    assert s["phases"]["warmup"]["energy_j"] is None
    assert s["phases"]["warmup"]["energy_source"] == "counter_at_markers"
    assert s["phases"]["measure"]["energy_j"] == 300.0
    # Integrated over the 1-second averaged power reading: 10 s needed, so nothing is reported.
    averaged = summarize_phases(synthetic_rows(energy=False, instant=False), MARKERS)
    assert averaged["phases"]["measure"]["energy_source"] == "integrated_power"
    assert averaged["phases"]["measure"]["energy_j"] is None
    assert "(1 s each, 10 s)" in averaged["energy_flags"]["measure"]


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def cooling_gpu(temperatures):
    def build():
        return fake_nvml.FakeNvml([fake_nvml.FakeGpu(temperatures_c=list(temperatures))])
    return build


def test_thermal_guard_waits_until_near_idle():
    idle = {"gpus": {fake_nvml.UUID_A: {"temp_c": 40.0}}}
    clock = FakeClock()
    # One read when the sensor is probed, one to choose the sensor, then one per poll.
    guard = wait_for_idle_temperature(5, 60, idle=idle, poll_s=2, clock=clock,
                                      sleep=clock.sleep,
                                      nvml=cooling_gpu([70, 70, 70, 60, 50, 44, 41]))
    assert guard["reached"] is True and guard["sensor"] == "gpu"
    assert guard["waited_s"] == 6.0
    assert guard["start_temp_c"] == 70 and guard["end_temp_c"] == 44

    clock = FakeClock()
    guard = wait_for_idle_temperature(5, 10, idle=idle, poll_s=2, clock=clock,
                                      sleep=clock.sleep, nvml=cooling_gpu([70]))
    assert guard["reached"] is False and guard["waited_s"] == 10.0
    assert "after 10 s" in guard["reason"]


def test_thermal_guard_uses_the_cpu_without_a_gpu(monkeypatch):
    monkeypatch.setattr(psutil, "sensors_temperatures", lambda: {
        "coretemp": [Temp("Package id 0", 52.0, 80.0, 100.0), Temp("Core 0", 49.0, 80.0, 100.0)]})
    guard = wait_for_idle_temperature(5, 60, idle={"cpu_temp_c": 50.0}, sleep=pytest.fail,
                                      nvml=fake_nvml.no_library)
    assert guard["sensor"] == "cpu" and guard["reached"] is True
    assert guard["start_temp_c"] == 52.0
    assert wait_for_idle_temperature(5, 60, idle=None)["reason"].startswith("no idle baseline")


# --- side files made on a real GPU, kept as fixtures ------------------------------------------

FIXTURES = sorted(Path(__file__).parent.glob("fixtures/telemetry/*/trial-*.telemetry.csv"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.parent.name)
def test_side_files_from_a_real_gpu_summarize(path):
    meta = json.loads(telemetry.sidecar_path(path).read_text())
    markers = json.loads((path.parent / "markers.json").read_text())
    summary = summarize_phases(path, markers["markers_ns"], markers.get("energy_mj"),
                               markers.get("batch_size"), markers.get("iterations"))
    assert summary["gpus"] == [g["uuid"] for g in meta["gpus"]]
    assert summary["phases"]["measure"]["energy_source"] == "counter_at_markers"
    assert summary["phases"]["measure"]["power_mean_w"] > 0


# --- one trial's trace, the table the report draws (fwbench.analysis.telemetry_trace) ---------

H100 = Path(__file__).parent / "fixtures" / "telemetry" / "h100"


def test_trace_of_a_real_gpu_trial_holds_its_samples_and_markers():
    from fwbench.analysis.telemetry_trace import trace_rows

    markers = json.loads((H100 / "markers.json").read_text())["markers_ns"]
    trace = trace_rows(H100 / "trial-0.telemetry.csv", markers, {"cell_id": "c", "trial": 0})
    marks = trace[trace["source"] == "marker"]
    assert list(marks["marker"]) == ["cold_start", "warmup", "measure", "end"]
    assert marks["t_s"].iloc[0] == 0 and marks["t_s"].is_monotonic_increasing
    gpu, cpu = trace[trace["source"] == "gpu"], trace[trace["source"] == "cpu"]
    assert len(gpu) == len(cpu) == 86
    assert (gpu["power_field"] == "gpu_power_instant_mw").all()
    assert gpu["gpu_power_w"].between(50, 800).all() and gpu["gpu_temp_c"].notna().all()
    assert cpu["cpu_util_pct"].notna().all() and cpu["cpu_temp_c"].isna().all()
    assert (trace["cell_id"] == "c").all()
    assert trace["t_s"].min() < 0  # the sampler starts before the trial's cold start


def test_trace_table_reads_the_longest_ok_trial_beside_its_result(tmp_path, tiny_config):
    import shutil

    from fwbench.analysis.tables import collect_tables
    from fwbench.analysis.telemetry_trace import trace_table
    from fwbench.measure.results import make_result, write_json
    from fwbench.measure.supervisor import Outcome
    from fwbench.plan.config import validate
    from fwbench.plan.sweep import Plan

    markers = json.loads((H100 / "markers.json").read_text())["markers_ns"]
    plan = Plan.from_config(validate({**tiny_config, "trials": 2}))
    paths = []
    for i, trial in enumerate(plan.trials):  # lasting 1, 2, 3 and 4 s; the longest is oom
        ok = i < len(plan.trials) - 1
        outcome = Outcome("ok" if ok else "oom", "" if ok else "out of memory",
                          {"iteration_ns": [1000], "cold_start_ns": 5000, "warmup_ns": [],
                           "markers_ns": markers} if ok else {}, 0)
        result = make_result(plan.trial_settings(trial), outcome,
                             started_at="2026-01-01T00:00:00+00:00",
                             ended_at=f"2026-01-01T00:00:0{i + 1}+00:00",
                             workflow={"git_commit": "abc", "git_dirty": False,
                                       "session": "host:1:1"})
        path = tmp_path / trial.path(plan.run)
        write_json(result, path)
        shutil.copy(H100 / "trial-0.telemetry.csv", path.with_suffix(".telemetry.csv"))
        paths.append(str(path))
    trials = collect_tables(paths)["trials"]
    trace = trace_table(trials, paths)
    longest = plan.trials[-2]
    assert set(trace["cell_id"]) == {longest.cell.id}
    assert set(trace["trial"]) == {longest.index}
    assert list(trace.loc[trace["source"] == "marker", "marker"]) == list(markers)
    assert trace_table(trials.assign(status="error"), paths).empty
