"""Verify the NVML telemetry path on a machine with an NVIDIA GPU and PyTorch.

    python scripts/verify_gpu_telemetry.py OUT_DIR [--seconds 5] [--period 0.1]

Measures the idle baseline twice (without, then with a CUDA context held, as trials use it;
with the energy counter's update period), runs the thermal guard, then a matrix-multiply
workload on cuda:0 under the Sampler, with phase markers and energy-counter readings taken after
a device sync, as the harness does, and reads the machine's state (power limit, persistence,
clocks, ECC, MIG; governor, turbo, SMT). Writes into OUT_DIR:

    trial-0.telemetry.csv, trial-0.telemetry.json   the side files, as a trial leaves them
    markers.json   markers_ns, energy_mj, batch_size, iterations: enough to re-summarize
    summary.json   environment, idle, guard, per-phase summary, and every check with its value

Exit status 0 when every required check passes, 1 when one fails, 2 when there is no GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # fwbench from this work tree

from fwbench.measure.telemetry import (  # noqa: E402
    Sampler,
    load_nvml,
    load_samples,
    measure_idle,
    normalize_uuid,
    read_energy_mj,
    summarize_phases,
    visible_gpu_uuids,
    wait_for_idle_temperature,
)
from fwbench.measure.telemetry.machine import machine_state  # noqa: E402

REQUIRED_COLUMNS = ("gpu_power_mw", "gpu_energy_mj", "gpu_util_pct", "gpu_mem_util_pct",
                    "gpu_mem_used_bytes", "gpu_temp_c", "gpu_sm_clock_mhz", "gpu_mem_clock_mhz",
                    "gpu_clocks_event_reasons", "gpu_pstate")
OPTIONAL_COLUMNS = ("gpu_power_instant_mw", "gpu_sm_active_pct", "gpu_sm_occupancy_pct")
SIZE = 8192


def main(out_dir: str, seconds: float = 5.0, period_s: float = 0.1) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    uuids = visible_gpu_uuids()
    if not uuids:
        print(f"no NVIDIA GPU visible to NVML: {load_nvml()[1]}", file=sys.stderr)
        return 2
    uuid = uuids[0]
    # Idle first, before torch makes a context here: without a context, then with one held
    # through the CUDA driver API (the baseline trials subtract), released again after.
    bare = measure_idle(3.0, period_s=period_s, gpu_uuids=[uuid], hold_context=_hold_nothing,
                        counter_probe_s=0)
    idle = measure_idle(3.0, period_s=period_s, gpu_uuids=[uuid])
    guard = wait_for_idle_temperature(5, 60, idle=idle, gpu_uuids=[uuid])
    state = machine_state()

    import torch
    torch_uuid = normalize_uuid(str(torch.cuda.get_device_properties(0).uuid))
    csv_path = out / "trial-0.telemetry.csv"
    with Sampler(csv_path, period_s=period_s, pid=os.getpid(), gpu_uuids=[uuid]) as sampler:
        run = workload(torch, [uuid], seconds)
        # Started after this process initialised CUDA: it must hold no CUDA context or torch.
        maps = Path(f"/proc/{sampler.ready['pid']}/maps").read_text()
        run["sampler_libraries"] = sorted({line.split()[-1].rsplit("/", 1)[-1] for line in
                                           maps.splitlines() if ".so" in line})
        run["sampler_pid"], run["context_pids"] = sampler.ready["pid"], context_pids(uuid)
    markers = {k: run[k] for k in ("markers_ns", "energy_mj", "batch_size", "iterations",
                                   "warmup_iterations")}
    (out / "markers.json").write_text(json.dumps(markers, indent=1) + "\n")

    summary = summarize_phases(csv_path, run["markers_ns"], run["energy_mj"], SIZE,
                               run["iterations"], warmup_iterations=run["warmup_iterations"],
                               idle=idle, gpu_uuids=[uuid])
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    checks = check(csv_path, meta, summary, run, idle, uuid, torch_uuid, period_s)
    checks.update(check_idle_and_state(summary, idle, bare, state, uuid))
    report = {"environment": environment(torch, meta), "uuid": uuid, "torch_uuid": torch_uuid,
              "idle": idle, "idle_without_context": bare, "machine_state": state,
              "thermal_guard": guard, "summary": summary,
              "iteration_ms_median": statistics.median(run["iteration_ns"]) / 1e6,
              "checks": checks}
    (out / "summary.json").write_text(json.dumps(report, indent=1) + "\n")
    for name, c in checks.items():
        print(f"{'ok  ' if c['ok'] else ('FAIL' if c['required'] else 'note')} {name}: "
              f"{c['value']}")
    failed = [n for n, c in checks.items() if c["required"] and not c["ok"]]
    print(f"{len(checks) - len(failed)}/{len(checks)} checks passed; files in {out}")
    return 1 if failed else 0


def workload(torch, uuids: list[str], seconds: float) -> dict:
    """Cold start, about 2 s of warm-up, then ``seconds`` of measured fp32 matmuls."""
    a = torch.randn(SIZE, SIZE, device="cuda")
    b = torch.randn(SIZE, SIZE, device="cuda")
    markers, energy, times = {}, {}, []

    def mark(name):
        torch.cuda.synchronize()
        markers[name] = time.perf_counter_ns()
        energy[name] = read_energy_mj(uuids)

    def step():
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        c = a @ b
        torch.cuda.synchronize()
        del c
        return time.perf_counter_ns() - start

    time.sleep(0.5)  # idle samples before the cold start
    mark("cold_start")
    step()
    mark("warmup")
    warmup = 0
    while time.perf_counter_ns() - markers["warmup"] < 2e9:
        step()
        warmup += 1
    mark("measure")
    while time.perf_counter_ns() - markers["measure"] < seconds * 1e9:
        times.append(step())
    mark("end")
    time.sleep(0.5)  # and after the end
    return {"markers_ns": markers, "energy_mj": energy, "batch_size": SIZE,
            "iterations": len(times), "warmup_iterations": warmup, "iteration_ns": times}


def check(csv_path, meta, summary, run, idle, uuid, torch_uuid, period_s) -> dict:
    rows = load_samples(csv_path)
    gpu = [r for r in rows if r["device"] == "gpu" and r["gpu_uuid"] == uuid]
    host = [r for r in rows if r["device"] == "cpu"]
    m = run["markers_ns"]
    inside = [r for r in gpu if m["measure"] <= r["t_ns"] < m["end"]]
    measure = summary["phases"]["measure"]
    sampled = summarize_phases(rows, m, None, SIZE, run["iterations"])["phases"]["measure"]
    no_counter = [{k: v for k, v in r.items() if k != "gpu_energy_mj"} for r in rows]
    integrated = summarize_phases(no_counter, m, None, SIZE, run["iterations"])
    integrated_j = integrated["phases"]["measure"]["energy_j"]
    late = sorted(r["t_ns"] - (meta["sampler"]["t0_ns"] + r["slot"] * period_s * 1e9)
                  for r in host)
    out = {}

    def add(name, ok, value, required=True):
        out[name] = {"ok": bool(ok), "value": value, "required": required}

    add("uuid_matches_torch", uuid == torch_uuid, f"nvml {uuid}, torch {torch_uuid}")
    loaded = [lib for lib in run["sampler_libraries"]
              if lib.startswith(("libcudart", "libtorch", "libc10"))]
    add("sampler_free_of_torch", not loaded, loaded or "no libcudart or libtorch in the "
        "sampler process")
    # NVML itself maps the driver's libcuda into the sampler (seen with driver 580 on an H200):
    # what must not happen is a context, which would take GPU memory and share the GPU.
    holders, sampler_pid = run["context_pids"], run["sampler_pid"]
    add("sampler_holds_no_cuda_context", sampler_pid not in holders,
        f"sampler pid {sampler_pid}; NVML's compute processes {holders}")
    add("context_listing_sees_this_process", os.getpid() in holders,
        f"this process {os.getpid()} among {holders} (a PID namespace hides it)", required=False)
    add("sampler_maps_libcuda", True, [lib for lib in run["sampler_libraries"]
                                       if lib.startswith("libcuda.")], required=False)
    add("gpu_rows", len(gpu) >= 0.8 * len(host), f"{len(gpu)} GPU rows, {len(host)} host rows")
    for column in REQUIRED_COLUMNS + OPTIONAL_COLUMNS:
        filled = sum(r.get(column) is not None for r in inside)
        add(f"column {column}", inside and filled == len(inside),
            f"{filled}/{len(inside)} filled; {meta['unavailable'].get(column, 'available')}",
            required=column in REQUIRED_COLUMNS)
    add("no_nvml_errors", not meta["errors"], meta["errors"])
    add("samples_bracket_markers",
        host and host[0]["t_ns"] <= m["cold_start"] and host[-1]["t_ns"] >= m["end"],
        f"first {host[0]['t_ns']} <= {m['cold_start']}, last {host[-1]['t_ns']} >= {m['end']}")
    add("schedule_on_time", late and late[0] >= 0 and late[len(late) // 2] < period_s * 5e8,
        f"median lateness {late[len(late) // 2] / 1e6:.2f} ms, max {late[-1] / 1e6:.2f} ms, "
        f"missed slots {meta['sampler']['missed_slots']}")
    add("energy_from_counter_at_markers", measure["energy_source"] == "counter_at_markers",
        f"{measure['energy_source']}: {measure['energy_j']} J")
    add("sampled_counter_agrees", _close(sampled["energy_j"], measure["energy_j"], 0.05),
        f"{sampled['energy_j']} J vs {measure['energy_j']} J")
    add("integrated_power_agrees", _close(integrated_j, measure["energy_j"], 0.15),
        f"{integrated_j} J ({integrated['power_field']}) vs {measure['energy_j']} J")
    add("busy_gpu", (measure["gpu_util_mean_pct"] or 0) >= 80,
        f"utilization {measure['gpu_util_mean_pct']} %, SM active "
        f"{measure.get('gpu_sm_active_mean_pct')} %")
    add("power_above_idle", (measure["power_mean_w"] or 0) > (idle["power_w"] or 0),
        f"{measure['power_mean_w']} W under load, {idle['power_w']} W idle")
    add("temperature_recorded", measure["gpu_temp_start_c"] is not None,
        f"start {measure['gpu_temp_start_c']} °C, max {measure['gpu_temp_max_c']} °C")
    return out


def context_pids(uuid: str) -> list[int]:
    """The processes holding a CUDA context on the GPU ``uuid``, as NVML lists them."""
    nvml, _ = load_nvml()
    handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
    return sorted(p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle))


@contextlib.contextmanager
def _hold_nothing(uuids):
    yield {"method": None, "held": [], "reason": "verification: idle without a context"}


def check_idle_and_state(summary, idle, bare, state, uuid) -> dict:
    """Issue 15 points 8 and 10: the idle baseline per GPU with a context held, the counter's
    update period, short windows flagged, and the machine's state from NVML and sysfs."""
    out = {}

    def add(name, ok, value, required=True):
        out[name] = {"ok": bool(ok), "value": value, "required": required}

    mine = idle["gpus"][uuid]
    add("idle_context_held", idle["context"]["held"] == [uuid] and mine["context_held"],
        idle["context"])
    add("idle_power_with_and_without_context", True,
        f"{mine['power_w']} W with a context, {bare['gpus'][uuid]['power_w']} W without",
        required=False)
    add("energy_counter_update_measured", mine["energy_counter_update_s"] is not None,
        f"{mine['energy_counter_update_s']} s")
    add("energy_above_idle_own_gpu_only", summary["idle_gpu_power_w"] == mine["power_w"],
        f"subtracted {summary['idle_gpu_power_w']} W; machine idle {idle['power_w']} W")
    add("measure_window_long_enough", "measure" not in summary["energy_flags"],
        summary["energy_flags"] or "no phase flagged")
    add("short_windows_flagged", True, summary["energy_flags"], required=False)
    gpu = next((g for g in state["gpus"] if g["uuid"] == uuid), None) or {"unavailable": {}}
    for field in ("power_limit_w", "persistence_mode", "ecc_current", "mig_current",
                  "compute_mode"):
        add(f"state {field}", gpu.get(field) is not None,
            f"{gpu.get(field)} {gpu['unavailable'].get(field, '')}".strip())
    for field in ("applications_clock_sm_mhz", "applications_clock_mem_mhz"):
        add(f"state {field}", gpu.get(field) is not None,
            f"{gpu.get(field)} {gpu['unavailable'].get(field, '')}".strip(), required=False)
    cpu = state["cpu"]
    add("state cpu", True, {k: cpu.get(k) for k in ("scaling_governor", "scaling_driver",
                                                    "turbo", "smt_control")} |
        {"unavailable": cpu["unavailable"]}, required=False)
    return out


def _close(a, b, tolerance) -> bool:
    return a is not None and b is not None and abs(a - b) <= tolerance * abs(b)


def environment(torch, meta) -> dict:
    nvml, _ = load_nvml()
    driver = nvml.nvmlSystemGetDriverVersion() if nvml else None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "driver": driver,
            "gpus": meta["gpus"], "python": sys.version.split()[0]}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured phase length")
    parser.add_argument("--period", type=float, default=0.1, help="sampling period in seconds")
    args = parser.parse_args()
    sys.exit(main(args.out_dir, args.seconds, args.period))
